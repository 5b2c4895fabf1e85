// Collectives and messages on device buffers, the way the plan says, with
// NCCL's stream semantics: a call enqueues its work on the caller's stream
// and returns. NCCL's collectives are enqueued as they are. Paths that need
// the host (UCX on device memory or through pinned bounce buffers) are queued for the
// communicator's worker thread: the call records an event on the stream
// (the worker starts when the stream reaches it) and makes the stream wait
// on a flag the worker sets when the data is in place. A failure there
// breaks the communicator: fwCommGetAsyncError reports it and later calls
// fail with it, and the stream is released so nothing waits forever.
// While the stream waits, the worker allocates nothing (CUDA may make an
// allocation wait for that stream): a call that may need memory (the
// first of its shape, device_call_shapes.h) runs with its stream left
// free, and its caller waits for it (runBeforeReturning).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "collective/collective_args.h"
#include "comm/collective_runner.h"
#include "comm/device_call_shapes.h"
#include "comm/local_machine.h"
#include "core/config.h"
#include "core/status.h"
#include "providers/device_data_space.h"
#include "providers/native_node_phase.h"
#include "providers/pinned_wire.h"
#include "providers/private_stream.h"
#include "providers/staging_buffer.h"
#include "transports/device_runtime.h"
#include "trace/flight_record.h"
#include "transports/native_collectives.h"

namespace fairway {

// Whether NCCL (nullptr: not usable) runs this collective natively: its
// kind, and its type with its op (NCCL has no bitwise reductions).
bool ncclRuns(const NativeCollectivesEntry* nccl, const CollectiveArgs& args);

class DeviceCollectives {
 public:
  // record: the communicator's, where device calls' entries are ended or marked enqueued.
  DeviceCollectives(CollectiveRunner& comm, const Config& config, LocalMachine& machine, FlightRecord& record);
  ~DeviceCollectives();

  // args is validated and its buffers are device memory.
  Status run(const CollectiveArgs& args, void* stream, uint64_t traceId);
  Status send(const void* buf, size_t count, fwDataType_t datatype, int peer, void* stream);
  Status recv(void* buf, size_t count, fwDataType_t datatype, int peer, void* stream);
  // Failures NCCL saw in work already enqueued.
  Status asyncError();
  void abort();

  // A shrink (communicator_shrink.cc) carries the NCCL communicators over:
  // the whole communicator's (flat native collectives) and the node's
  // (two-phase's node phase). Whether each exists and can shrink
  // (ncclCommShrink).
  bool nativeCanShrink();
  bool nodePhaseCanShrink();
  // Aborts the NCCL communicators at once but for those `keep` names (the
  // ones a shrink carries over: ncclCommShrink aborts their in-flight work).
  void abortNcclExcept(bool keepNative, bool keepNodePhase);
  // Collective over the survivors (of the node, for the node phase): their
  // NCCL communicator, made from this one by ncclCommShrink without the
  // ranks in `exclude` (ascending ranks of that communicator).
  Status shrinkNative(const std::vector<int>& exclude, bool abortInFlight, std::unique_ptr<NativeCollectives>* out);
  Status shrinkNodePhase(const std::vector<int>& exclude, bool abortInFlight,
                         std::unique_ptr<NativeCollectives>* out);
  // The shrunk communicator takes them instead of making its own.
  void adoptNative(std::unique_ptr<NativeCollectives> native);
  void adoptNodePhase(std::unique_ptr<NativeCollectives> native);

 private:
  Status ensureNative();
  Status createNative(int rank, int size, const uint8_t* idRecord, int maker, std::unique_ptr<NativeCollectives>* out,
                      std::string* busId);
  Status runNative(const CollectiveArgs& args, void* stream);
  // Queues body for the worker, ordered on stream as described above, with
  // `collectives` collective numbers reserved for it.
  Status enqueueOnWorker(void* stream, uint32_t collectives, std::function<Status(uint32_t firstSequence)> body);
  // The same, in call order on the worker, but the stream is not made to
  // wait: the caller waits until the work is done, so work it enqueues on
  // the stream afterwards still sees the result. The worker may allocate.
  Status runBeforeReturning(void* stream, uint32_t collectives, std::function<Status(uint32_t firstSequence)> body);
  // What both run on the worker: the wait for the stream, then body; a
  // failure breaks the communicator.
  Status runWhenStreamReaches(void* startEvent, uint32_t first,
                              const std::function<Status(uint32_t firstSequence)>& body);
  // Whether a staged message of `bytes` finds its slices and copy stream in place.
  bool stagingReadyFor(size_t bytes) const;
  // The worker's wait for the stream to reach a call: bounded by the
  // timeout, cut short when the communicator breaks.
  Status waitForStream(void* startEvent);
  Status acquireEvent(void** out);
  // An event from the pool, recorded on stream: where the worker starts.
  Status recordStart(void* stream, void** start);
  void releaseEvent(void* event);
  // Two-phase across nodes with NCCL inside them: NCCL over this node's
  // ranks serves the node phase, made at the first such call.
  Status ensureNodePhase();
  // The plan's algorithm, once, on the worker (see the .cc).
  Status runOnDevice(const CollectiveArgs& args, const Selection& plan, uint32_t sequence, uint64_t traceId);
  bool ucxDirect() const;
  PinnedDataSpace& pinnedRail();
  DeviceDataSpace& deviceSpace();
  PinnedWire& wire();
  // Messages (device_messages.cc).
  size_t messageSlices(size_t bytes) const;
  Status stagedSend(const void* buf, size_t bytes, int peer, uint64_t number);
  Status stagedRecv(void* buf, size_t bytes, int peer, uint64_t number);
  Status directSend(const void* buf, size_t bytes, int peer, uint64_t number);
  Status directRecv(void* buf, size_t bytes, int peer, uint64_t number);
  Status ensureStagingResources();

  CollectiveRunner& comm_;
  FlightRecord& record_;
  DeviceRuntime& device_;
  // What the transport is told a device buffer's bytes are (host memory
  // under the host-emulated runtime).
  MemoryType deviceMemoryType() const { return device_.memoryIsCuda() ? MemoryType::Cuda : MemoryType::Host; }
  const NativeCollectivesEntry* nccl_;  // null: NCCL is not usable here
  int64_t timeoutMs_;  // bounds every wait on a stream or event
  size_t stagingSliceBytes_;  // FAIRWAY_STAGING_SLICE_BYTES
  std::mutex mutex_;  // one device call at a time per communicator
  std::unique_ptr<NativeCollectives> native_;
  // Worker hand-off: the flag streams wait on, and the last ticket issued
  // (the flag reaches ticket t when call t's data is in place).
  uint32_t* doneFlag_ = nullptr;
  uint32_t issued_ = 0;
  std::mutex eventsMutex_;
  std::vector<void*> freeEvents_;  // start events not in use
  std::vector<void*> allEvents_;
  // Worker-only from here: staging buffers and the copy stream.
  PrivateStream copier_;
  void* copyStream_ = nullptr;  // copier_'s stream, once made
  StagingBuffer slices_[2];  // a staged message's slices
  std::unique_ptr<DeviceDataSpace> deviceSpace_;
  std::unique_ptr<PinnedWire> wire_;  // the staged wire of collectives UCX cannot reach
  std::unique_ptr<PinnedDataSpace> railSpace_;   // the staged rail of two-phase and compressed collectives
  std::unique_ptr<NativeNodePhase> nodePhase_;   // made by the caller's thread, used by the worker
  DeviceCallShapes shapesRun_;  // callers' threads only, under mutex_
};

}  // namespace fairway
