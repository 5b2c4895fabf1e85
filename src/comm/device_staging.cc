// The staged path of device buffers: UCX that cannot reach device memory
// gets pinned host copies of them, moved by the communicator's worker on
// a private copy stream (see docs/DESIGN.md, "Device buffers").
#include <algorithm>

#include "comm/device_collectives.h"
#include "core/datatype.h"
#include "p2p/tags.h"

namespace fairway {
namespace {

size_t slicesOf(size_t count, size_t sliceLength) { return (count + sliceLength - 1) / sliceLength; }

}  // namespace

// One collective number for the whole call, whatever its size: the
// selected algorithm runs slice after slice under it, every slice's
// messages carrying the call's signature (a sender's messages under one
// tag match in order, so slices never cross).
Status DeviceCollectives::enqueueStaged(const CollectiveArgs& a, const Selection& plan, void* stream) {
  return enqueueOnWorker(stream, 1, [this, a, plan](uint32_t sequence) {
    switch (a.kind) {
      case CollectiveKind::AllReduce:
      case CollectiveKind::Broadcast:
      case CollectiveKind::Reduce:
        return runStagedInSlices(a, plan, stagedSliceElements(a), sequence);
      case CollectiveKind::AllToAllv: return runStagedAllToAllv(a, sequence);
      case CollectiveKind::Barrier: return runStagedSlice(a, a, plan, sequence);
      default: return runStagedBlocks(a, plan, blockSliceElements(a), sequence);
    }
  });
}

Status DeviceCollectives::runStagedSlice(const CollectiveArgs& whole, const CollectiveArgs& slice, const Selection& plan,
                                         uint32_t sequence) {
  CollectiveRunner::Reserved how;
  how.chosen = true;
  how.selection = plan;
  how.whole = &whole;
  return comm_.runReserved(slice, sequence, how);
}

Status DeviceCollectives::ensureStagingResources() {
  if (copyStream_ != nullptr) return Status::ok();
  FW_RETURN_IF_ERROR(copier_.get(&copyStream_));
  for (void*& event : sliceReady_) FW_RETURN_IF_ERROR(device_.createEvent(&event));
  return Status::ok();
}

size_t DeviceCollectives::stagedSliceElements(const CollectiveArgs& a) const {
  return std::max<size_t>(1, stagingSliceBytes_ / datatypeSize(a.datatype));
}

// Slice s is copied to the host while slice s-1 crosses the network and
// slice s-2 is copied back; one copy stream keeps the copies in order, so a
// host buffer is refilled only after its previous slice has left it.
Status DeviceCollectives::runStagedInSlices(const CollectiveArgs& a, const Selection& plan, size_t sliceCount,
                                            uint32_t sequence) {
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
    FW_RETURN_IF_ERROR(runStagedSlice(a, slice, plan, sequence));
    if (hasOutput) {
      FW_RETURN_IF_ERROR(device_.copyAsync(static_cast<char*>(a.recv) + s * sliceCount * es, slices_[s % 2].data(),
                                           slice.count * es, copyStream_));
    }
  }
  return copier_.wait();
}

// Where a slice's pieces sit in the caller's buffers, in elements: for the
// collectives whose buffers hold one block per rank, slice [from, from+len)
// of every block on the side that has n blocks, and of the one block on the
// other side. Rooted collectives have no pieces on the side a non-root
// rank does not hold.
namespace {

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

}  // namespace

size_t DeviceCollectives::blockSliceElements(const CollectiveArgs& a) const {
  // n pieces of a slice fit the staging budget; the same on every rank.
  const size_t perElement = static_cast<size_t>(comm_.size()) * datatypeSize(a.datatype);
  return std::max<size_t>(1, stagingSliceBytes_ / perElement);
}

// Collectives with a block per rank move in slices of every block: the
// slice's pieces are packed into one pinned buffer, the selected algorithm
// runs the same collective on `len` elements, and the result is unpacked. A slice's
// copies in finish before its host call and before the next slice's pack
// (one copy stream), so the two pinned buffers never exceed
// FAIRWAY_STAGING_SLICE_BYTES each. In place works slice by slice: a
// slice is packed whole before any of it is written back.
Status DeviceCollectives::runStagedBlocks(const CollectiveArgs& a, const Selection& plan, size_t sliceLength,
                                          uint32_t sequence) {
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
    FW_RETURN_IF_ERROR(copier_.wait());  // packed, and the last slice unpacked
    CollectiveArgs slice = a;
    slice.count = len;
    slice.send = pieces.in.empty() ? nullptr : whole_[0].data();
    slice.recv = pieces.out.empty() ? nullptr : whole_[1].data();
    FW_RETURN_IF_ERROR(runStagedSlice(a, slice, plan, sequence));
    for (size_t i = 0; i < pieces.out.size(); ++i) {
      FW_RETURN_IF_ERROR(device_.copyAsync(static_cast<char*>(a.recv) + pieces.out[i] * es,
                                           whole_[1].data() + i * len * es, len * es, copyStream_));
    }
  }
  return copier_.wait();
}

// All-to-all-v's blocks differ in length from rank to rank, so no slice
// of the whole call is the same on every rank: it runs as the pairwise
// exchange (step k: to r+k, from r-k), each pair's blocks moving in slices
// of FAIRWAY_STAGING_SLICE_BYTES through one pinned buffer per direction.
// Both sides of a pair cut a block alike (sendcounts[to] on one side must
// equal recvcounts[from] on the other; a difference is a truncation UCX
// reports), so staging stays within the two slice buffers at any size.
Status DeviceCollectives::runStagedAllToAllv(const CollectiveArgs& a, uint32_t sequence) {
  const int n = comm_.size(), r = comm_.rank();
  const size_t es = datatypeSize(a.datatype), slice = stagingSliceBytes_;
  const uint8_t signature = collectiveSignature(a);
  FW_RETURN_IF_ERROR(ensureStagingResources());
  char* const send = static_cast<char*>(const_cast<void*>(a.send));
  char* const recv = static_cast<char*>(a.recv);
  if (a.sendcounts[r] > 0) {
    FW_RETURN_IF_ERROR(
        device_.copyAsync(recv + a.rdispls[r] * es, send + a.sdispls[r] * es, a.sendcounts[r] * es, copyStream_));
  }
  Messenger& messenger = comm_.messenger();
  for (int k = 1; k < n; ++k) {
    const int to = (r + k) % n, from = (r - k + n) % n;
    const size_t sendBytes = a.sendcounts[to] * es, recvBytes = a.recvcounts[from] * es;
    const size_t sendSlices = messageSlices(sendBytes), recvSlices = messageSlices(recvBytes);
    FW_RETURN_IF_ERROR(slices_[0].reserve(std::min(sendBytes, slice)));
    FW_RETURN_IF_ERROR(slices_[1].reserve(std::min(recvBytes, slice)));
    for (size_t i = 0; i < std::max(sendSlices, recvSlices); ++i) {
      Pending pending[2];
      const size_t sendLen = i < sendSlices ? std::min(slice, sendBytes - i * slice) : 0;
      const size_t recvLen = i < recvSlices ? std::min(slice, recvBytes - i * slice) : 0;
      if (i < recvSlices) {
        FW_RETURN_IF_ERROR(messenger.recv(from, slices_[1].data(), recvLen,
                                          Tag::collective(from, sequence, signature, static_cast<uint32_t>(k)),
                                          &pending[0]));
      }
      if (i < sendSlices) {
        if (sendLen > 0) {
          FW_RETURN_IF_ERROR(device_.copyAsync(slices_[0].data(), send + a.sdispls[to] * es + i * slice, sendLen,
                                               copyStream_));
        }
        FW_RETURN_IF_ERROR(copier_.wait());
        FW_RETURN_IF_ERROR(messenger.send(to, slices_[0].data(), sendLen,
                                          Tag::collective(r, sequence, signature, static_cast<uint32_t>(k)),
                                          &pending[1]));
      }
      Status moved = messenger.waitAll(pending, 2);
      if (!moved.isOk()) {
        messenger.cancel(pending, 2);  // nothing lands in the slice buffers later
        return moved;
      }
      if (recvLen > 0) {
        FW_RETURN_IF_ERROR(device_.copyAsync(recv + a.rdispls[from] * es + i * slice, slices_[1].data(), recvLen,
                                             copyStream_));
        FW_RETURN_IF_ERROR(copier_.wait());  // emptied before the next slice lands
      }
    }
  }
  return copier_.wait();
}

// A staged message moves in slices of FAIRWAY_STAGING_SLICE_BYTES through
// the two pinned slice buffers, each slice one UCX message under the
// call's message number (a sender's messages match in order), so its
// staging memory is bounded whatever the message's size: the next slice
// is copied while the last one crosses the network. Sender and receiver
// cut alike (a count that differs is a mismatch UCX reports); an empty
// message is one empty slice.
size_t DeviceCollectives::messageSlices(size_t bytes) const {
  const size_t slice = stagingSliceBytes_;
  return std::max<size_t>(1, (bytes + slice - 1) / slice);
}

Status DeviceCollectives::stagedSend(const void* buf, size_t bytes, int peer, uint64_t number) {
  const size_t slice = stagingSliceBytes_, slices = messageSlices(bytes);
  FW_RETURN_IF_ERROR(ensureStagingResources());
  for (StagingBuffer& b : slices_) FW_RETURN_IF_ERROR(b.reserve(std::min(bytes, slice)));
  Pending pending[2];
  for (size_t s = 0; s < slices; ++s) {
    StagingBuffer& b = slices_[s % 2];
    FW_RETURN_IF_ERROR(comm_.messenger().wait(&pending[s % 2]));  // the buffer's last slice has left
    const size_t len = std::min(slice, bytes - s * slice);
    FW_RETURN_IF_ERROR(device_.copyAsync(b.data(), static_cast<const char*>(buf) + s * slice, len, copyStream_));
    FW_RETURN_IF_ERROR(copier_.wait());
    FW_RETURN_IF_ERROR(comm_.pointToPoint().postSendNumbered(b.data(), len, peer, PointToPoint::kDefaultTag, number,
                                                             &pending[s % 2]));
  }
  return comm_.messenger().waitAll(pending, 2);
}

Status DeviceCollectives::stagedRecv(void* buf, size_t bytes, int peer, uint64_t number) {
  const size_t slice = stagingSliceBytes_, slices = messageSlices(bytes);
  FW_RETURN_IF_ERROR(ensureStagingResources());
  for (StagingBuffer& b : slices_) FW_RETURN_IF_ERROR(b.reserve(std::min(bytes, slice)));
  Pending pending[2];
  auto post = [&](size_t s) {
    return comm_.pointToPoint().postRecvNumbered(slices_[s % 2].data(), std::min(slice, bytes - s * slice), peer,
                                                 PointToPoint::kDefaultTag, number, &pending[s % 2]);
  };
  for (size_t s = 0; s < std::min<size_t>(2, slices); ++s) FW_RETURN_IF_ERROR(post(s));
  for (size_t s = 0; s < slices; ++s) {
    FW_RETURN_IF_ERROR(comm_.messenger().wait(&pending[s % 2]));
    FW_RETURN_IF_ERROR(device_.copyAsync(static_cast<char*>(buf) + s * slice, slices_[s % 2].data(),
                                         std::min(slice, bytes - s * slice), copyStream_));
    if (s + 2 < slices) {
      FW_RETURN_IF_ERROR(copier_.wait());  // emptied before it is refilled
      FW_RETURN_IF_ERROR(post(s + 2));
    }
  }
  return copier_.wait();
}

}  // namespace fairway
