// A communicator: the ranks of one job (or of a split of it), connected by a
// transport, running collectives and point-to-point messages among them.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "algorithms/data_space.h"
#include "collective/collective_args.h"
#include "comm/collective_runner.h"
#include "comm/device_collectives.h"
#include "comm/executor.h"
#include "comm/local_machine.h"
#include "core/config.h"
#include "p2p/messenger.h"
#include "p2p/point_to_point.h"
#include "p2p/scratch.h"
#include "providers/shm/shm_node.h"
#include "selection/selection_memo.h"
#include "topo/net_device.h"
#include "topo/rank_layout.h"
#include "topo/transport_plan.h"
#include "trace/flight_record.h"
#include "trace/trace_registry.h"

namespace fairway {

class Communicator final : public CollectiveRunner, public TraceSource {
 public:
  // Exchanges each rank's bytes with every other rank, out of band: the
  // bootstrap root, or a parent communicator during a split.
  using OobAllgather = std::function<Status(const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>* all)>;

  static Status create(const OobAllgather& oob, int rank, int size, const Config& config,
                       std::unique_ptr<Communicator>* out);
  ~Communicator();

  int rank() const override { return messenger_->rank(); }
  int size() const override { return messenger_->size(); }

  // Runs a validated collective and returns when it is done.
  Status collective(const CollectiveArgs& args) override;
  // Queues it behind earlier collectives; *operation reports completion.
  Status startCollective(const CollectiveArgs& args, std::shared_ptr<AsyncOperation>* operation);

  // FAIRWAY_COMPRESS: gives a validated plain call on host buffers the
  // compression its rule names, when the call's type, op and size qualify
  // (logged at INFO on rank 0, once per collective).
  void applyCompressionRules(CollectiveArgs* args);

  // Where the buffers of a validated call live: host unless a CUDA runtime
  // says device. Mixing the two in one call is an error.
  Status memoryTypeOf(const CollectiveArgs& args, MemoryType* out);
  MemoryType memoryTypeOf(const void* buf);
  // Device-buffer calls, on stream (see DeviceCollectives).
  bool hasDevicePath() const { return device_ != nullptr; }
  Status deviceCollective(const CollectiveArgs& args, void* stream);
  Status deviceSend(const void* buf, size_t count, fwDataType_t datatype, int peer, void* stream);
  Status deviceRecv(void* buf, size_t count, fwDataType_t datatype, int peer, void* stream);
  // The communicator's failure, or one NCCL saw in enqueued work.
  Status asyncError();

  // CollectiveRunner: reserved work for the device path.
  Status startReserved(uint32_t collectives, std::function<Status(uint32_t firstSequence)> fn) override;
  Status runReserved(const CollectiveArgs& args, uint32_t sequence, const Reserved& how) override {
    return execute(args, sequence, {}, how);
  }
  PointToPoint& pointToPoint() override { return pointToPoint_; }
  Messenger& messenger() override { return *messenger_; }
  const RankLayout& layout() const override { return layout_; }
  const TransportPlan& plan() const { return plan_; }
  const Config& config() const { return config_; }
  const Selector& selector() const override { return selector_; }
  // The network device of this rank's inter-node traffic (empty: UCX's choice).
  const NetDeviceChoice& netDevice() const { return netDevice_; }
  LocalMachine& machine() { return *machine_; }

  // Ranks with the same color form a new communicator, ordered by key then
  // rank. FAIRWAY_SPLIT_NOCOLOR leaves *out empty.
  Status split(int color, int key, std::unique_ptr<Communicator>* out);

  // fwCommShrink (communicator_shrink.cc): the survivors agree on the
  // ranks to leave out (exclude, plus every failed rank) and form *out of
  // the others. flags: FAIRWAY_SHRINK_ABORT revokes this one first.
  Status shrink(const std::vector<int>& exclude, int flags, std::unique_ptr<Communicator>* out);
  // fwCommRevoke: fwRevoked on every live rank from now on.
  void revoke();
  std::vector<int> failedRanks() const { return messenger_->failedRanks(); }

  // Waits for queued work, synchronises with the peers (bounded by the
  // timeout) while healthy, and closes the connections.
  Status destroy();
  // Breaks the communicator at once and tells the peers.
  void abort();

  // The flight record (communicator_trace.cc): every operation's entry,
  // and the process's dump of every communicator's (TraceSource).
  const FlightRecord& flightRecord() const { return record_; }
  CommunicatorTrace traceSnapshot() override;
  int traceGlobalRank() const override { return globalRanks_.empty() ? rank() : globalRanks_[rank()]; }
  // A message's entry (fwSend/fwRecv and their forms), posted and started
  // now; peer -1: any source. traceEnded ends it (or an entry of a
  // collective's non-blocking form: none, its executor ends it).
  uint64_t traceMessage(bool isSend, int peer, size_t count, fwDataType_t datatype, void* stream);
  void traceEnded(uint64_t id, const Status& result, size_t bytes);
  // The caller's number for the next operation posted here (fwPost's
  // callerSequence), kept in its entry.
  void numberNextCall(uint64_t callerSequence) { callerSequence_ = callerSequence; }
  // A device message, handed to its stream.
  void traceEnqueued(uint64_t id) { record_.enqueued(id); }
  // Writes the process's dump into dir (empty: FAIRWAY_TRACE_DIR).
  Status dumpTrace(const std::string& dir, const std::string& reason, std::string* path);

 private:
  // The list forms take host memory only: an error naming the first
  // buffer that is device memory.
  Status checkListInHostMemory(const CollectiveArgs& args, bool anyBytes, MemoryType* out);
  Communicator(const Config& config, const Selector& selector, std::unique_ptr<Messenger> messenger,
               const RankLayout& layout, const TransportPlan& plan, LocalMachine* machine, const NetDeviceChoice& net);
  // FAIRWAY_MEASURE_LINKS: measures the links and gives them to the selector.
  Status adoptMeasuredLinks();
  // Maps the node's shared-memory segment (communicator_shm.cc); where it
  // cannot, says why and leaves the node's host collectives to UCX.
  Status attachSharedMemory();
  // Registers with the process's dumps and arms FAIRWAY_TRACE_SIGNAL.
  void startTracing();
  // How a child of this one (split, shrink) is named in dumps: desc, and
  // members, this communicator's ranks that form it.
  void nameTraceOfChild(Communicator* child, const std::string& desc, const std::vector<int>& members) const;
  // The entry a call of args as collective #sequence gets in the record.
  TraceEntry traceEntryOf(const CollectiveArgs& args, uint32_t sequence, uint8_t memory, void* stream) const;
  // The entry of a call the caller made (numbered by numberNextCall, if it was).
  TraceEntry callerEntryOf(const CollectiveArgs& args, uint32_t sequence, uint8_t memory, void* stream);
  // Once per communicator, where FAIRWAY_TRACE_DIR is set: the dump of a failure.
  void dumpOnFailure(const std::string& reason);
  // Runs args on the ranks in group (empty: everyone) as collective #sequence.
  Status execute(const CollectiveArgs& args, uint32_t sequence, const std::vector<int>& group,
                 const Reserved& how);
  Status allgatherBytesInGroup(const std::vector<int>& group, uint32_t sequence, const std::vector<uint8_t>& mine,
                               std::vector<std::vector<uint8_t>>* all);
  // The survivors' agreement on whom a shrink leaves out (communicator_shrink.cc).
  Status agreeOnExcluded(uint32_t attempt, const std::set<int>& requested, std::set<int>* excluded);
  // The shrunk communicator's NCCL communicator: this one's shrunk
  // (ncclCommShrink) where every member's can, else none (made afresh at
  // its first device call).
  Status shrinkNativeInto(const std::set<int>& excluded, bool abortInFlight, Communicator* shrunk);

  Config config_;
  Selector selector_;
  SelectionMemo selections_{selector_};  // asked by execute(), one call at a time
  std::unique_ptr<Messenger> messenger_;
  RankLayout layout_;
  TransportPlan plan_;
  NetDeviceChoice netDevice_;
  LocalMachine* machine_;  // process-wide, outlives every communicator
  Scratch scratch_;
  HostDataSpace hostSpace_{scratch_};
  uint32_t nextSequence_ = 0;  // advanced in call order, identically on every rank
  uint32_t shrinkAttempts_ = 0;  // fwCommShrink calls on this communicator
  std::atomic<unsigned> compressionLogged_{0};  // collectives whose rule rank 0 has logged
  PointToPoint pointToPoint_;
  std::unique_ptr<DeviceCollectives> device_;  // null on machines without a CUDA device
  std::unique_ptr<SharedMemoryNode> shm_;      // null where the node has no segment
  FlightRecord record_;
  std::string traceName_;          // the same on every member (a hash of the ranks' records)
  std::string traceDesc_ = "world";
  std::vector<int> globalRanks_;   // members as ranks of the first communicator
  std::atomic<bool> failureDumped_{false};
  uint64_t messagesTraced_ = 0;    // numbers messages' entries, in call order
  uint64_t callerSequence_ = 0;    // numberNextCall's, until the next post takes it
  Executor executor_;  // last: its worker must stop before the rest goes
};

}  // namespace fairway
