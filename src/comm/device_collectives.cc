#include "comm/device_collectives.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>

#include "algorithms/registry.h"
#include "core/datatype.h"
#include "core/log.h"

namespace fairway {
namespace {

// NCCL's unique id is 128 bytes; room for a length word and a larger id.
constexpr size_t kUniqueIdMessageBytes = 512;

// One flag per communicator, from pages that are never freed: a stream may
// still hold a wait on a flag (its GPU queue behind) after the
// communicator is gone, and a freed or reused word would release it wrongly
// or be read after free. Four bytes per communicator ever created.
Status allocateDoneFlag(DeviceRuntime& device, uint32_t** out) {
  constexpr size_t kFlagsPerPage = 1024;
  static std::mutex mutex;
  static std::map<DeviceRuntime*, std::pair<uint32_t*, size_t>> pages;  // current page, flags used
  std::lock_guard<std::mutex> lock(mutex);
  auto& page = pages[&device];
  if (page.first == nullptr || page.second == kFlagsPerPage) {
    FW_RETURN_IF_ERROR(device.allocateFlags(kFlagsPerPage, &page.first));
    page.second = 0;
  }
  *out = page.first + page.second++;
  return Status::ok();
}

// This rank's NCCL id in a record of kUniqueIdMessageBytes: its length,
// then the id. A rank that could not make one still sends its record
// (length 0), so no rank is left waiting; its failure is returned.
Status makeIdRecord(const NativeCollectivesEntry& nccl, uint8_t* record) {
  std::vector<uint8_t> id;
  Status made = nccl.makeUniqueId(&id);
  if (made.isOk() && id.size() + 4 > kUniqueIdMessageBytes) made = Status(fwInternalError, "nccl unique id too long");
  const uint32_t length = made.isOk() ? static_cast<uint32_t>(id.size()) : 0;
  std::memcpy(record, &length, 4);
  if (length > 0) std::memcpy(record + 4, id.data(), length);
  return made;
}

}  // namespace

DeviceCollectives::DeviceCollectives(CollectiveRunner& comm, const Config& config, LocalMachine& machine,
                                     FlightRecord& record)
    : comm_(comm),
      record_(record),
      device_(*machine.device),
      nccl_(machine.nccl),
      timeoutMs_(config.timeoutMs),
      stagingSliceBytes_(config.pipeline.stagingSliceBytes),
      copier_(device_, timeoutMs_),
      slices_{{device_, StagingBuffer::Kind::Pinned}, {device_, StagingBuffer::Kind::Pinned}} {}

DeviceCollectives::~DeviceCollectives() {
  native_.reset();
  nodePhase_.reset();
  for (void* event : allEvents_) device_.destroyEvent(event);
}

bool ncclRuns(const NativeCollectivesEntry* nccl, const CollectiveArgs& a) {
  if (nccl == nullptr) return false;
  switch (a.kind) {
    case CollectiveKind::AllReduce:
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::Reduce:
      return nccl->supports(a.datatype, a.op);
    case CollectiveKind::AllGather:
    case CollectiveKind::Broadcast:
      return nccl->supports(a.datatype, fwSum);
    default:
      return false;  // all-to-all, gather, scatter: staged over UCX
  }
}

Status DeviceCollectives::ensureNative() {
  if (native_) return Status::ok();
  // Rank 0 makes the id; everyone gets it over Fairway's own broadcast. A
  // failure on rank 0 still broadcasts (an empty id) so no rank is left waiting.
  uint8_t message[kUniqueIdMessageBytes] = {};
  const Status made = comm_.rank() == 0 ? makeIdRecord(*nccl_, message) : Status::ok();
  FW_RETURN_IF_ERROR(comm_.collective(makeArgs(CollectiveKind::Broadcast, message, message, sizeof(message)))
                         .withContext("sending the NCCL unique id"));
  FW_RETURN_IF_ERROR(made.withContext("rank 0 making the NCCL unique id"));
  std::string busId;
  FW_RETURN_IF_ERROR(createNative(comm_.rank(), comm_.size(), message, 0, &native_, &busId));
  FW_LOG(Info, Init, "rank %d: NCCL communicator of %d ranks on GPU %s", comm_.rank(), comm_.size(), busId.c_str());
  return Status::ok();
}

// A native communicator of `size` ranks from the id record rank `maker` made.
Status DeviceCollectives::createNative(int rank, int size, const uint8_t* record, int maker,
                                       std::unique_ptr<NativeCollectives>* out, std::string* busId) {
  uint32_t length = 0;
  std::memcpy(&length, record, 4);
  if (length == 0 || length + 4 > kUniqueIdMessageBytes) {
    return Status(fwRemoteError, "rank " + std::to_string(maker) + " could not make an NCCL unique id");
  }
  NativeInitArgs init;
  init.rank = rank;
  init.size = size;
  init.uniqueId.assign(record + 4, record + 4 + length);
  FW_RETURN_IF_ERROR(device_.currentDevice(&init.device, busId));
  return nccl_->create(init, out);
}

Status DeviceCollectives::runNative(const CollectiveArgs& a, void* stream) {
  FW_RETURN_IF_ERROR(ensureNative());
  switch (a.kind) {
    case CollectiveKind::AllReduce: return native_->allReduce(a.send, a.recv, a.count, a.datatype, a.op, stream);
    case CollectiveKind::ReduceScatter:
      return native_->reduceScatter(a.send, a.recv, a.count, a.datatype, a.op, stream);
    case CollectiveKind::AllGather: return native_->allGather(a.send, a.recv, a.count, a.datatype, stream);
    case CollectiveKind::Broadcast: return native_->broadcast(a.send, a.recv, a.count, a.datatype, a.root, stream);
    case CollectiveKind::Reduce:
      return native_->reduce(a.send, a.recv, a.count, a.datatype, a.op, a.root, stream);
    default: return Status(fwInternalError, "no native form of this collective");
  }
}

Status DeviceCollectives::acquireEvent(void** out) {
  std::lock_guard<std::mutex> lock(eventsMutex_);
  if (freeEvents_.empty()) {
    void* event = nullptr;
    FW_RETURN_IF_ERROR(device_.createEvent(&event));
    allEvents_.push_back(event);
    freeEvents_.push_back(event);
  }
  *out = freeEvents_.back();
  freeEvents_.pop_back();
  return Status::ok();
}

void DeviceCollectives::releaseEvent(void* event) {
  std::lock_guard<std::mutex> lock(eventsMutex_);
  freeEvents_.push_back(event);
}

Status DeviceCollectives::waitForStream(void* startEvent) {
  constexpr int64_t kCheckEveryMs = 20;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs_);
  for (;;) {
    Status reached = device_.waitEvent(startEvent, std::min(kCheckEveryMs, timeoutMs_));
    if (reached.code() != fwTimeout) return reached;
    FW_RETURN_IF_ERROR(comm_.messenger().brokenStatus());
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status(fwTimeout, "rank " + std::to_string(comm_.rank()) +
                                   ": the stream did not reach the call within FAIRWAY_TIMEOUT_MS=" +
                                   std::to_string(timeoutMs_) + " ms");
    }
  }
}

Status DeviceCollectives::recordStart(void* stream, void** start) {
  FW_RETURN_IF_ERROR(acquireEvent(start));
  const Status recorded = device_.recordEvent(*start, stream);
  if (!recorded.isOk()) releaseEvent(*start);
  return recorded;
}

Status DeviceCollectives::runWhenStreamReaches(void* startEvent, uint32_t first,
                                               const std::function<Status(uint32_t firstSequence)>& body) {
  Status done = waitForStream(startEvent);
  releaseEvent(startEvent);
  if (done.isOk()) done = body(first);
  if (!done.isOk()) {
    // Breaks the communicator (the first failure wins) and tells the
    // peers; the stream goes on, its result undefined, the error kept.
    comm_.messenger().fail(done);
    FW_LOG(Warn, Coll, "rank %d: device call failed on the worker: %s", comm_.rank(), done.message().c_str());
  }
  return done;
}

Status DeviceCollectives::runBeforeReturning(void* stream, uint32_t collectives,
                                             std::function<Status(uint32_t firstSequence)> body) {
  FW_RETURN_IF_ERROR(comm_.messenger().brokenStatus());
  void* start = nullptr;
  FW_RETURN_IF_ERROR(recordStart(stream, &start));
  auto finished = std::make_shared<std::promise<Status>>();
  std::future<Status> outcome = finished->get_future();
  Status st = comm_.startReserved(collectives, [this, start, finished, body = std::move(body)](uint32_t first) {
    Status done = runWhenStreamReaches(start, first, body);
    finished->set_value(done);
    return done;
  });
  if (!st.isOk()) {
    releaseEvent(start);
    return st;
  }
  // The worker's waits are bounded (the stream's arrival, every message);
  // this one allows for the calls queued ahead of it too. Past it the
  // communicator is broken, which ends the worker's waits at once.
  const auto bound = std::chrono::milliseconds(4 * timeoutMs_);
  if (outcome.wait_for(bound) != std::future_status::ready) {
    const Status late(fwTimeout, "rank " + std::to_string(comm_.rank()) +
                                     ": a device call's first run did not end within " +
                                     std::to_string(4 * timeoutMs_) + " ms (4 x FAIRWAY_TIMEOUT_MS)");
    comm_.messenger().fail(late);
    if (outcome.wait_for(std::chrono::milliseconds(timeoutMs_)) != std::future_status::ready) return late;
  }
  return outcome.get();
}

Status DeviceCollectives::enqueueOnWorker(void* stream, uint32_t collectives,
                                          std::function<Status(uint32_t firstSequence)> body) {
  FW_RETURN_IF_ERROR(comm_.messenger().brokenStatus());
  if (doneFlag_ == nullptr) FW_RETURN_IF_ERROR(allocateDoneFlag(device_, &doneFlag_));
  void* start = nullptr;
  FW_RETURN_IF_ERROR(recordStart(stream, &start));
  const uint32_t ticket = ++issued_;
  Status st = device_.streamWaitFlag(stream, doneFlag_, ticket);
  if (!st.isOk()) {
    releaseEvent(start);
    return st;
  }
  st = comm_.startReserved(collectives, [this, start, ticket, body = std::move(body)](uint32_t first) {
    Status done;
    {
      StagingBuffer::GatedStreamScope gated;
      done = runWhenStreamReaches(start, first, body);
    }
    device_.setFlag(doneFlag_, ticket);
    return done;
  });
  if (!st.isOk()) device_.setFlag(doneFlag_, ticket);  // never queued: release the stream now
  return st;
}

// Collective over the communicator, at the first two-phase call (the same
// call on every rank): each node's local rank 0 makes an NCCL id, one
// allgather carries them all, and each node's ranks form their NCCL
// communicator. On the caller's thread, like NCCL's own initialisation.
Status DeviceCollectives::ensureNodePhase() {
  if (nodePhase_) return Status::ok();
  const RankLayout& layout = comm_.layout();
  const int rank = comm_.rank(), node = layout.nodeOf(rank);
  std::vector<uint8_t> mine(kUniqueIdMessageBytes, 0), all(kUniqueIdMessageBytes * comm_.size(), 0);
  const Status made =
      layout.localRankOf(rank) == 0 ? makeIdRecord(*nccl_, mine.data()) : Status::ok();
  FW_RETURN_IF_ERROR(comm_.collective(makeArgs(CollectiveKind::AllGather, mine.data(), all.data(),
                                                     kUniqueIdMessageBytes))
                         .withContext("exchanging the nodes' NCCL unique ids"));
  FW_RETURN_IF_ERROR(made.withContext("making this node's NCCL unique id"));
  const int leader = layout.ranksOfNode(node)[0];
  std::unique_ptr<NativeCollectives> native;
  std::string busId;
  FW_RETURN_IF_ERROR(createNative(layout.localRankOf(rank), layout.localSizeOf(rank),
                                  all.data() + static_cast<size_t>(leader) * kUniqueIdMessageBytes, leader, &native,
                                  &busId)
                         .withContext("the node's NCCL communicator"));
  nodePhase_ = std::make_unique<NativeNodePhase>(device_, timeoutMs_, std::move(native));
  if (!ucxDirect()) pinnedRail();
  FW_LOG(Info, Coll, "rank %d: two-phase on device buffers: NCCL over node %d (%d ranks, GPU %s), rail over %s",
         rank, node, layout.localSizeOf(rank), busId.c_str(), ucxDirect() ? "UCX on device memory" : "UCX through pinned host memory");
  return Status::ok();
}

bool DeviceCollectives::ucxDirect() const { return comm_.selector().deviceRoutes().ucxDirect; }

DeviceDataSpace& DeviceCollectives::deviceSpace() {
  if (!deviceSpace_) deviceSpace_ = std::make_unique<DeviceDataSpace>(device_, timeoutMs_);
  return *deviceSpace_;
}

PinnedDataSpace& DeviceCollectives::pinnedRail() {
  if (!railSpace_) railSpace_ = std::make_unique<PinnedDataSpace>(device_);
  return *railSpace_;
}

PinnedWire& DeviceCollectives::wire() {
  if (!wire_) wire_ = std::make_unique<PinnedWire>(device_);
  return *wire_;
}

// The selection table decides. NCCL's own collective is enqueued on the
// stream; everything else is the plan's algorithm, run once on the worker
// over the device buffers (runOnDevice).
Status DeviceCollectives::run(const CollectiveArgs& a, void* stream, uint64_t traceId) {
  std::lock_guard<std::mutex> lock(mutex_);
  SelectionKey key = selectionKeyOf(a, comm_.size(), &comm_.layout(), /*onDevice=*/true);
  key.ncclRunsIt = ncclRuns(nccl_, a);
  const Selection plan = comm_.selector().select(key);
  if (rowOf(plan.algorithm)->placement == Placement::ProviderOwn) {  // NCCL's own collective
    // Its end is the stream's: the record says it went there.
    FW_RETURN_IF_ERROR(runNative(a, stream));
    record_.started(traceId, static_cast<uint8_t>(plan.algorithm), static_cast<uint8_t>(plan.node));
    record_.enqueued(traceId);
    return Status::ok();
  }
  if (plan.node == Provider::Nccl) FW_RETURN_IF_ERROR(ensureNodePhase());
  auto body = [this, a, plan, traceId](uint32_t sequence) { return runOnDevice(a, plan, sequence, traceId); };
  const std::string shape = DeviceCallShapes::keyOf(a, comm_.size());
  if (shapesRun_.seen(shape)) return enqueueOnWorker(stream, 1, std::move(body));
  FW_RETURN_IF_ERROR(runBeforeReturning(stream, 1, std::move(body)));
  shapesRun_.remember(shape);
  return Status::ok();
}

// Copies, reductions and scratch on the device (DeviceDataSpace). The
// messages go from and to the device memory itself where UCX reaches it,
// else through pinned bounce buffers (the staged wire). Two-phase with
// NCCL inside nodes has NCCL run its node phase and its rail work in
// pinned host memory when UCX cannot reach the device's.
Status DeviceCollectives::runOnDevice(const CollectiveArgs& a, const Selection& plan, uint32_t sequence,
                                      uint64_t traceId) {
  CollectiveRunner::Reserved how;
  how.traceId = traceId;
  how.chosen = true;
  how.selection = plan;
  // What this communicator has for device buffers; the plan binds to
  // them in the communicator (selection/plan_binding.h).
  how.providers.buffers = &deviceSpace();
  how.providers.ncclNode = nodePhase_.get();
  how.providers.pinnedRail = railSpace_.get();
  if (!ucxDirect()) how.providers.stagedWire = &wire();
  return comm_.runReserved(a, sequence, how);
}

Status DeviceCollectives::asyncError() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (nodePhase_) FW_RETURN_IF_ERROR(nodePhase_->asyncError());
  return native_ ? native_->asyncError() : Status::ok();
}

void DeviceCollectives::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (native_) native_->abort();
  if (nodePhase_) nodePhase_->abort();
}

bool DeviceCollectives::nativeCanShrink() {
  std::lock_guard<std::mutex> lock(mutex_);
  return native_ && native_->canShrink();
}

bool DeviceCollectives::nodePhaseCanShrink() {
  std::lock_guard<std::mutex> lock(mutex_);
  return nodePhase_ && nodePhase_->native().canShrink();
}

void DeviceCollectives::abortNcclExcept(bool keepNative, bool keepNodePhase) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (native_ && !keepNative) native_->abort();
  if (nodePhase_ && !keepNodePhase) nodePhase_->abort();
}

Status DeviceCollectives::shrinkNative(const std::vector<int>& exclude, bool abortInFlight,
                                       std::unique_ptr<NativeCollectives>* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!native_) return Status(fwInternalError, "no NCCL communicator to shrink");
  return native_->shrink(exclude, abortInFlight, out);
}

void DeviceCollectives::adoptNative(std::unique_ptr<NativeCollectives> native) {
  std::lock_guard<std::mutex> lock(mutex_);
  native_ = std::move(native);
}

Status DeviceCollectives::shrinkNodePhase(const std::vector<int>& exclude, bool abortInFlight,
                                          std::unique_ptr<NativeCollectives>* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!nodePhase_) return Status(fwInternalError, "no node NCCL communicator to shrink");
  return nodePhase_->native().shrink(exclude, abortInFlight, out);
}

void DeviceCollectives::adoptNodePhase(std::unique_ptr<NativeCollectives> native) {
  std::lock_guard<std::mutex> lock(mutex_);
  nodePhase_ = std::make_unique<NativeNodePhase>(device_, timeoutMs_, std::move(native));
  if (!ucxDirect()) pinnedRail();  // as ensureNodePhase makes it
}

}  // namespace fairway
