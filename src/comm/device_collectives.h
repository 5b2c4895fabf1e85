// Collectives and messages on device buffers, the way the plan says: NCCL's
// own collectives on the caller's stream, or UCX through pinned host
// buffers. The staged path is synchronous for the host: it waits for the
// stream's earlier work, moves the data, and returns with the result copied
// back, so work enqueued on the stream afterwards sees it.
#pragma once

#include <memory>
#include <mutex>

#include "comm/collective_args.h"
#include "comm/device_two_phase.h"
#include "comm/staging_buffer.h"
#include "core/status.h"
#include "transports/device_runtime.h"
#include "transports/native_collectives.h"

namespace fairway {

class Communicator;

// Whether NCCL (nullptr: not usable) runs this collective natively: its
// kind, and its type with its op (NCCL has no bitwise reductions).
bool ncclRuns(const NativeCollectivesEntry* nccl, const CollectiveArgs& args);

class DeviceCollectives {
 public:
  explicit DeviceCollectives(Communicator& comm);
  ~DeviceCollectives();

  // args is validated and its buffers are device memory.
  Status run(const CollectiveArgs& args, void* stream);
  Status send(const void* buf, size_t count, fwDataType_t datatype, int peer, void* stream);
  Status recv(void* buf, size_t count, fwDataType_t datatype, int peer, void* stream);
  // Failures NCCL saw in work already enqueued.
  Status asyncError();
  void abort();

 private:
  bool nativeHandles(const CollectiveArgs& args) const;
  Status ensureNative();
  Status runNative(const CollectiveArgs& args, void* stream);
  Status runStagedInSlices(const CollectiveArgs& args, void* stream);
  Status runStagedWhole(const CollectiveArgs& args, void* stream);
  Status ensureStagingResources();

  Communicator& comm_;
  DeviceRuntime& device_;
  int64_t timeoutMs_;  // bounds every wait on a stream or event
  std::mutex mutex_;  // one device operation at a time per communicator
  std::unique_ptr<NativeCollectives> native_;
  void* copyStream_ = nullptr;
  void* sliceReady_[2] = {nullptr, nullptr};
  StagingBuffer slices_[2];
  StagingBuffer whole_[2];  // send and receive sides of an unsliced collective
  DeviceTwoPhase twoPhase_;  // device collectives across nodes, NCCL inside each
};

}  // namespace fairway
