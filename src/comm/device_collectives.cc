#include "comm/device_collectives.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>

#include "comm/communicator.h"
#include "core/datatype.h"
#include "core/log.h"

namespace fairway {
namespace {

// NCCL's unique id is 128 bytes; room for a length word and a larger id.
constexpr size_t kUniqueIdMessageBytes = 512;

bool elementwise(CollectiveKind kind) {
  return kind == CollectiveKind::AllReduce || kind == CollectiveKind::Broadcast || kind == CollectiveKind::Reduce;
}

size_t slicesOf(size_t count, size_t sliceLength) { return (count + sliceLength - 1) / sliceLength; }

bool rangesOverlap(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes > 0 && bBytes > 0 && x < y + bBytes && y < x + aBytes;
}

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

DeviceCollectives::DeviceCollectives(Communicator& comm)
    : comm_(comm),
      device_(*comm.machine().device),
      timeoutMs_(comm.config().timeoutMs),
      slices_{{device_, StagingBuffer::Kind::Pinned}, {device_, StagingBuffer::Kind::Pinned}},
      whole_{{device_, StagingBuffer::Kind::Pinned}, {device_, StagingBuffer::Kind::Pinned}} {}

DeviceCollectives::~DeviceCollectives() {
  native_.reset();
  nodePhase_.reset();
  for (void* event : sliceReady_) {
    if (event != nullptr) device_.destroyEvent(event);
  }
  for (void* event : allEvents_) device_.destroyEvent(event);
  if (copyStream_ != nullptr) device_.destroyStream(copyStream_);
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

bool DeviceCollectives::nativeHandles(const CollectiveArgs& a) const {
  return comm_.plan().deviceCollectives == DevicePath::Nccl && ncclRuns(comm_.machine().nccl, a);
}

Status DeviceCollectives::ensureNative() {
  if (native_) return Status::ok();
  // Rank 0 makes the id; everyone gets it over Fairway's own broadcast. A
  // failure on rank 0 still broadcasts (an empty id) so no rank is left waiting.
  uint8_t message[kUniqueIdMessageBytes] = {};
  const Status made = comm_.rank() == 0 ? makeIdRecord(*comm_.machine().nccl, message) : Status::ok();
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
  return comm_.machine().nccl->create(init, out);
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

Status DeviceCollectives::ensureStagingResources() {
  if (copyStream_ != nullptr) return Status::ok();
  FW_RETURN_IF_ERROR(device_.createStream(&copyStream_));
  for (void*& event : sliceReady_) FW_RETURN_IF_ERROR(device_.createEvent(&event));
  return Status::ok();
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

Status DeviceCollectives::enqueueOnWorker(void* stream, uint32_t collectives,
                                          std::function<Status(uint32_t firstSequence)> body) {
  FW_RETURN_IF_ERROR(comm_.messenger().brokenStatus());
  if (doneFlag_ == nullptr) FW_RETURN_IF_ERROR(allocateDoneFlag(device_, &doneFlag_));
  void* start = nullptr;
  FW_RETURN_IF_ERROR(acquireEvent(&start));
  Status st = device_.recordEvent(start, stream);
  if (!st.isOk()) {
    releaseEvent(start);
    return st;
  }
  const uint32_t ticket = ++issued_;
  st = device_.streamWaitFlag(stream, doneFlag_, ticket);
  if (!st.isOk()) {
    releaseEvent(start);
    return st;
  }
  st = comm_.startReserved(collectives, [this, start, ticket, body = std::move(body)](uint32_t first) {
    Status done = waitForStream(start);
    releaseEvent(start);
    if (done.isOk()) done = body(first);
    if (!done.isOk()) {
      // Breaks the communicator (the first failure wins) and tells the
      // peers; the stream goes on, its result undefined, the error kept.
      comm_.messenger().fail(done);
      FW_LOG(Warn, Coll, "rank %d: device call failed on the worker: %s", comm_.rank(), done.message().c_str());
    }
    device_.setFlag(doneFlag_, ticket);
    return done;
  });
  if (!st.isOk()) device_.setFlag(doneFlag_, ticket);  // never queued: release the stream now
  return st;
}

size_t DeviceCollectives::stagedSliceElements(const CollectiveArgs& a) const {
  return std::max<size_t>(1, comm_.config().pipeline.stagingSliceBytes / datatypeSize(a.datatype));
}

// Slice s is copied to the host while slice s-1 crosses the network and
// slice s-2 is copied back; one copy stream keeps the copies in order, so a
// host buffer is refilled only after its previous slice has left it. Each
// slice is one host collective, numbered first + s.
Status DeviceCollectives::runStagedInSlices(const CollectiveArgs& a, size_t sliceCount, uint32_t firstSequence) {
  const size_t es = datatypeSize(a.datatype);
  const size_t slices = slicesOf(a.count, sliceCount);
  const bool root = comm_.rank() == a.root;
  const bool hasInput = a.kind != CollectiveKind::Broadcast || root;
  const bool hasOutput = a.kind != CollectiveKind::Reduce || root;
  FW_RETURN_IF_ERROR(ensureStagingResources());
  for (StagingBuffer& slice : slices_) FW_RETURN_IF_ERROR(slice.reserve(std::min(a.count, sliceCount) * es));

  auto load = [&](size_t s) -> Status {
    const size_t offset = s * sliceCount * es;
    const size_t bytes = std::min(sliceCount, a.count - s * sliceCount) * es;
    if (hasInput) {
      FW_RETURN_IF_ERROR(device_.copyAsync(slices_[s % 2].data(), static_cast<const char*>(a.send) + offset, bytes,
                                           copyStream_));
    }
    return device_.recordEvent(sliceReady_[s % 2], copyStream_);
  };
  if (slices > 0) FW_RETURN_IF_ERROR(load(0));
  for (size_t s = 0; s < slices; ++s) {
    FW_RETURN_IF_ERROR(device_.waitEvent(sliceReady_[s % 2], timeoutMs_));
    if (s + 1 < slices) FW_RETURN_IF_ERROR(load(s + 1));
    CollectiveArgs slice = a;
    slice.count = std::min(sliceCount, a.count - s * sliceCount);
    slice.send = slice.recv = slices_[s % 2].data();  // in place on the host
    FW_RETURN_IF_ERROR(comm_.runReserved(slice, firstSequence + static_cast<uint32_t>(s)));
    if (hasOutput) {
      FW_RETURN_IF_ERROR(device_.copyAsync(static_cast<char*>(a.recv) + s * sliceCount * es, slices_[s % 2].data(),
                                           slice.count * es, copyStream_));
    }
  }
  return device_.synchronize(copyStream_, timeoutMs_);
}

// Where a slice's pieces sit in the caller's buffers, in elements: for the
// collectives whose buffers hold one block per rank, slice [from, from+len)
// of every block on the side that has n blocks, and of the one block on the
// other side. Rooted collectives have no pieces on the side a non-root
// rank does not hold.
struct SlicePieces {
  std::vector<size_t> in, out;
};

SlicePieces piecesOf(const CollectiveArgs& a, int rank, int n, size_t from) {
  SlicePieces p;
  std::vector<size_t> everyBlock(n);
  for (int r = 0; r < n; ++r) everyBlock[r] = static_cast<size_t>(r) * a.count + from;
  const bool root = rank == a.root;
  switch (a.kind) {
    case CollectiveKind::AllGather: p.in = {from}; p.out = everyBlock; break;
    case CollectiveKind::ReduceScatter: p.in = everyBlock; p.out = {from}; break;
    case CollectiveKind::AllToAll: p.in = everyBlock; p.out = everyBlock; break;
    case CollectiveKind::Gather: p.in = {from}; if (root) p.out = everyBlock; break;
    case CollectiveKind::Scatter: if (root) p.in = everyBlock; p.out = {from}; break;
    default: break;
  }
  return p;
}

size_t DeviceCollectives::blockSliceElements(const CollectiveArgs& a) const {
  // n pieces of a slice fit the staging budget; the same on every rank.
  const size_t perElement = static_cast<size_t>(comm_.size()) * datatypeSize(a.datatype);
  return std::max<size_t>(1, comm_.config().pipeline.stagingSliceBytes / perElement);
}

// Collectives with a block per rank move in slices of every block: the
// slice's pieces are packed into one pinned buffer, the host runs the same
// collective on `len` elements, and the result is unpacked. A slice's
// copies in finish before its host call and before the next slice's pack
// (one copy stream), so the two pinned buffers never exceed
// FAIRWAY_STAGING_SLICE_BYTES each. In place works slice by slice: a
// slice is packed whole before any of it is written back.
Status DeviceCollectives::runStagedBlocks(const CollectiveArgs& a, size_t sliceLength, uint32_t firstSequence) {
  const size_t es = datatypeSize(a.datatype);
  const int n = comm_.size();
  const size_t slices = slicesOf(a.count, sliceLength);
  FW_RETURN_IF_ERROR(ensureStagingResources());
  const size_t most = static_cast<size_t>(n) * std::min(a.count, sliceLength) * es;
  FW_RETURN_IF_ERROR(whole_[0].reserve(most));
  FW_RETURN_IF_ERROR(whole_[1].reserve(most));
  for (size_t s = 0; s < slices; ++s) {
    const size_t from = s * sliceLength, len = std::min(sliceLength, a.count - from);
    const SlicePieces pieces = piecesOf(a, comm_.rank(), n, from);
    for (size_t i = 0; i < pieces.in.size(); ++i) {
      FW_RETURN_IF_ERROR(device_.copyAsync(whole_[0].data() + i * len * es,
                                           static_cast<const char*>(a.send) + pieces.in[i] * es, len * es,
                                           copyStream_));
    }
    FW_RETURN_IF_ERROR(device_.synchronize(copyStream_, timeoutMs_));  // packed, and the last slice unpacked
    CollectiveArgs slice = a;
    slice.count = len;
    slice.send = pieces.in.empty() ? nullptr : whole_[0].data();
    slice.recv = pieces.out.empty() ? nullptr : whole_[1].data();
    FW_RETURN_IF_ERROR(comm_.runReserved(slice, firstSequence + static_cast<uint32_t>(s)));
    for (size_t i = 0; i < pieces.out.size(); ++i) {
      FW_RETURN_IF_ERROR(device_.copyAsync(static_cast<char*>(a.recv) + pieces.out[i] * es,
                                           whole_[1].data() + i * len * es, len * es, copyStream_));
    }
  }
  return device_.synchronize(copyStream_, timeoutMs_);
}

// All-to-all-v's blocks differ in length from rank to rank, so no slice
// count is known to all ranks: it moves whole (and a barrier has no data). In-place forms (one buffer
// inside the other) are staged as one host range, so the host call is in
// place too; the receive buffer is loaded first so the gaps between its
// blocks come back unchanged.
Status DeviceCollectives::runStagedWhole(const CollectiveArgs& a, uint32_t firstSequence) {
  size_t sendBytes = 0, recvBytes = 0;
  bufferBytes(a, comm_.rank(), comm_.size(), &sendBytes, &recvBytes);
  FW_RETURN_IF_ERROR(ensureStagingResources());
  CollectiveArgs host = a;
  const bool shared = rangesOverlap(a.send, sendBytes, a.recv, recvBytes);
  if (shared) {
    auto lo = std::min(reinterpret_cast<uintptr_t>(a.send), reinterpret_cast<uintptr_t>(a.recv));
    auto hi = std::max(reinterpret_cast<uintptr_t>(a.send) + sendBytes, reinterpret_cast<uintptr_t>(a.recv) + recvBytes);
    FW_RETURN_IF_ERROR(whole_[0].reserve(hi - lo));
    char* base = static_cast<char*>(whole_[0].data());
    FW_RETURN_IF_ERROR(device_.copyAsync(base, reinterpret_cast<const void*>(lo), hi - lo, copyStream_));
    host.send = base + (reinterpret_cast<uintptr_t>(a.send) - lo);
    host.recv = base + (reinterpret_cast<uintptr_t>(a.recv) - lo);
  } else {
    FW_RETURN_IF_ERROR(whole_[0].reserve(sendBytes));
    FW_RETURN_IF_ERROR(whole_[1].reserve(recvBytes));
    if (sendBytes > 0) FW_RETURN_IF_ERROR(device_.copyAsync(whole_[0].data(), a.send, sendBytes, copyStream_));
    if (recvBytes > 0 && a.kind == CollectiveKind::AllToAllv) {
      FW_RETURN_IF_ERROR(device_.copyAsync(whole_[1].data(), a.recv, recvBytes, copyStream_));
    }
    host.send = sendBytes > 0 ? whole_[0].data() : nullptr;
    host.recv = recvBytes > 0 ? whole_[1].data() : nullptr;
  }
  FW_RETURN_IF_ERROR(device_.synchronize(copyStream_, timeoutMs_));
  FW_RETURN_IF_ERROR(comm_.runReserved(host, firstSequence));
  if (recvBytes > 0) FW_RETURN_IF_ERROR(device_.copyAsync(a.recv, host.recv, recvBytes, copyStream_));
  return device_.synchronize(copyStream_, timeoutMs_);
}

bool DeviceCollectives::twoPhaseHandles(const CollectiveArgs& a) const {
  const RankLayout& layout = comm_.layout();
  if (!comm_.plan().deviceTwoPhase || layout.nodeCount() < 2 || !layout.uniform()) return false;
  const bool twoPhaseKind = a.kind == CollectiveKind::AllReduce || a.kind == CollectiveKind::ReduceScatter ||
                            a.kind == CollectiveKind::AllGather;
  return twoPhaseKind && ncclRuns(comm_.machine().nccl, a);
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
      layout.localRankOf(rank) == 0 ? makeIdRecord(*comm_.machine().nccl, mine.data()) : Status::ok();
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
  if (!direct()) railSpace_ = std::make_unique<PinnedDataSpace>(device_);
  FW_LOG(Info, Coll, "rank %d: two-phase on device buffers: NCCL over node %d (%d ranks, GPU %s), rail over %s",
         rank, node, layout.localSizeOf(rank), busId.c_str(), direct() ? "UCX on device memory" : "UCX through pinned host memory");
  return Status::ok();
}

Status DeviceCollectives::runTwoPhase(const CollectiveArgs& a, uint32_t sequence) {
  Hierarchy hierarchy;
  hierarchy.node = nodePhase_.get();
  hierarchy.rail = railSpace_.get();  // null: the rail works on the device memory itself
  hierarchy.required = true;
  return comm_.runReserved(a, sequence, deviceSpace(), hierarchy);
}

bool DeviceCollectives::direct() const { return comm_.plan().deviceOverUcx == DevicePath::Ucx; }

DeviceDataSpace& DeviceCollectives::deviceSpace() {
  if (!deviceSpace_) deviceSpace_ = std::make_unique<DeviceDataSpace>(device_, timeoutMs_);
  return *deviceSpace_;
}

Status DeviceCollectives::runDirect(const CollectiveArgs& a, uint32_t sequence) {
  return comm_.runReserved(a, sequence, deviceSpace());
}

Status DeviceCollectives::run(const CollectiveArgs& a, void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (nativeHandles(a)) return runNative(a, stream);
  if (twoPhaseHandles(a)) {
    FW_RETURN_IF_ERROR(ensureNodePhase());
    return enqueueOnWorker(stream, 1, [this, a](uint32_t sequence) { return runTwoPhase(a, sequence); });
  }
  if (direct()) {
    return enqueueOnWorker(stream, 1, [this, a](uint32_t sequence) { return runDirect(a, sequence); });
  }
  if (a.kind == CollectiveKind::AllToAllv || a.kind == CollectiveKind::Barrier) {
    return enqueueOnWorker(stream, 1, [this, a](uint32_t first) { return runStagedWhole(a, first); });
  }
  // One host collective per slice: the numbers are reserved now, in call order.
  const bool sliced = elementwise(a.kind);
  const size_t sliceLength = sliced ? stagedSliceElements(a) : blockSliceElements(a);
  const auto slices = static_cast<uint32_t>(slicesOf(a.count, sliceLength));
  return enqueueOnWorker(stream, slices, [this, a, sliced, sliceLength](uint32_t first) {
    return sliced ? runStagedInSlices(a, sliceLength, first) : runStagedBlocks(a, sliceLength, first);
  });
}

// A staged message moves in slices of FAIRWAY_STAGING_SLICE_BYTES through
// the two pinned slice buffers, each slice one UCX message under the
// call's message number (a sender's messages match in order), so its
// staging memory is bounded whatever the message's size: the next slice
// is copied while the last one crosses the network. Sender and receiver
// cut alike (a count that differs is a mismatch UCX reports); an empty
// message is one empty slice.
size_t DeviceCollectives::messageSlices(size_t bytes) const {
  const size_t slice = comm_.config().pipeline.stagingSliceBytes;
  return std::max<size_t>(1, (bytes + slice - 1) / slice);
}

Status DeviceCollectives::stagedSend(const void* buf, size_t bytes, int peer, uint64_t number) {
  const size_t slice = comm_.config().pipeline.stagingSliceBytes, slices = messageSlices(bytes);
  FW_RETURN_IF_ERROR(ensureStagingResources());
  for (StagingBuffer& b : slices_) FW_RETURN_IF_ERROR(b.reserve(std::min(bytes, slice)));
  Pending pending[2];
  for (size_t s = 0; s < slices; ++s) {
    StagingBuffer& b = slices_[s % 2];
    FW_RETURN_IF_ERROR(comm_.messenger().wait(&pending[s % 2]));  // the buffer's last slice has left
    const size_t len = std::min(slice, bytes - s * slice);
    FW_RETURN_IF_ERROR(device_.copyAsync(b.data(), static_cast<const char*>(buf) + s * slice, len, copyStream_));
    FW_RETURN_IF_ERROR(device_.synchronize(copyStream_, timeoutMs_));
    FW_RETURN_IF_ERROR(comm_.postSendNumbered(b.data(), len, peer, number, &pending[s % 2]));
  }
  return comm_.messenger().waitAll(pending, 2);
}

Status DeviceCollectives::stagedRecv(void* buf, size_t bytes, int peer, uint64_t number) {
  const size_t slice = comm_.config().pipeline.stagingSliceBytes, slices = messageSlices(bytes);
  FW_RETURN_IF_ERROR(ensureStagingResources());
  for (StagingBuffer& b : slices_) FW_RETURN_IF_ERROR(b.reserve(std::min(bytes, slice)));
  Pending pending[2];
  auto post = [&](size_t s) {
    return comm_.postRecvNumbered(slices_[s % 2].data(), std::min(slice, bytes - s * slice), peer, number,
                                  &pending[s % 2]);
  };
  for (size_t s = 0; s < std::min<size_t>(2, slices); ++s) FW_RETURN_IF_ERROR(post(s));
  for (size_t s = 0; s < slices; ++s) {
    FW_RETURN_IF_ERROR(comm_.messenger().wait(&pending[s % 2]));
    FW_RETURN_IF_ERROR(device_.copyAsync(static_cast<char*>(buf) + s * slice, slices_[s % 2].data(),
                                         std::min(slice, bytes - s * slice), copyStream_));
    if (s + 2 < slices) {
      FW_RETURN_IF_ERROR(device_.synchronize(copyStream_, timeoutMs_));  // emptied before it is refilled
      FW_RETURN_IF_ERROR(post(s + 2));
    }
  }
  return device_.synchronize(copyStream_, timeoutMs_);
}

// UCX sends from or receives into the device buffer itself.
Status DeviceCollectives::directSend(const void* buf, size_t bytes, int peer, uint64_t number) {
  Pending pending;
  FW_RETURN_IF_ERROR(comm_.postSendNumbered(buf, bytes, peer, number, &pending));
  return comm_.messenger().wait(&pending);
}

Status DeviceCollectives::directRecv(void* buf, size_t bytes, int peer, uint64_t number) {
  Pending pending;
  FW_RETURN_IF_ERROR(comm_.postRecvNumbered(buf, bytes, peer, number, &pending));
  return comm_.messenger().wait(&pending);
}

Status DeviceCollectives::send(const void* buf, size_t count, fwDataType_t datatype, int peer, void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (comm_.plan().deviceCollectives == DevicePath::Nccl) {
    FW_RETURN_IF_ERROR(ensureNative());
    return native_->send(buf, count, datatype, peer, stream);
  }
  const size_t bytes = count * datatypeSize(datatype);
  const uint64_t number = comm_.reserveSendNumber(peer);  // in call order, like the collectives' numbers
  const bool fromDevice = direct();
  return enqueueOnWorker(stream, 0, [this, buf, bytes, peer, number, fromDevice](uint32_t) {
    return fromDevice ? directSend(buf, bytes, peer, number)
                      : stagedSend(buf, bytes, peer, number);
  });
}

Status DeviceCollectives::recv(void* buf, size_t count, fwDataType_t datatype, int peer, void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (comm_.plan().deviceCollectives == DevicePath::Nccl) {
    FW_RETURN_IF_ERROR(ensureNative());
    return native_->recv(buf, count, datatype, peer, stream);
  }
  const size_t bytes = count * datatypeSize(datatype);
  const uint64_t number = comm_.reserveRecvNumber(peer);
  const bool intoDevice = direct();
  return enqueueOnWorker(stream, 0, [this, buf, bytes, peer, number, intoDevice](uint32_t) {
    return intoDevice ? directRecv(buf, bytes, peer, number) : stagedRecv(buf, bytes, peer, number);
  });
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

}  // namespace fairway
