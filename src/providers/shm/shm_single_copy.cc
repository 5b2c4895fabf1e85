// The shared-memory provider's single-copy rounds: a rank reads what it
// needs straight from its owner's buffer (peer_memory.h: the kernel's
// copy, or plain copies of a mapped one; one copy instead of the
// segment's two; an in-place all-to-all also writes), in one round per call (the reductions: two, or the
// segment's rounds with only their inputs read in place); which sizes
// take them are the node's single-copy windows (shm_windows.cc).
#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "algorithms/context.h"
#include "providers/shm/shm_copy.h"
#include "providers/shm/shm_node.h"

namespace fairway {

// Reaching a peer's memory (Linux cross-memory attach): allowed only with
// ptrace access to the peer, which canReadPeers probes once at creation.
void SharedMemoryNode::publishAddress() {
  Control& mine = control(localRank_);
  mine.selfAddress.store(reinterpret_cast<uintptr_t>(&mine), std::memory_order_release);
}

bool SharedMemoryNode::canReadPeers() const {
  for (int p = 0; p < ranks_; ++p) {
    if (p == localRank_) continue;
    uint64_t theirs = 0;
    const uint64_t where = control(p).selfAddress.load(std::memory_order_acquire) + offsetof(Control, selfAddress);
    if (where == offsetof(Control, selfAddress)) return false;
    if (!peers_.read(p, &theirs, where, sizeof(theirs)).isOk()) return false;
    if (theirs + offsetof(Control, selfAddress) != where) return false;  // read something else
  }
  return true;
}

void SharedMemoryNode::publish(std::atomic<uint64_t>& address, PublishedAllocation& where, const void* p) {
  address.store(reinterpret_cast<uintptr_t>(p), std::memory_order_relaxed);
  MappableAllocation a;
  if (p == nullptr || !anyMappable() || !findMappable(p, 1, &a)) {
    where.id.store(0, std::memory_order_relaxed);
    return;
  }
  where.base.store(a.base, std::memory_order_relaxed);
  where.bytes.store(a.bytes, std::memory_order_relaxed);
  where.inode.store(a.inode, std::memory_order_relaxed);
  where.fd.store(a.fd, std::memory_order_relaxed);
  where.id.store(a.id, std::memory_order_relaxed);
}

bool SharedMemoryNode::mapped(const void* p, size_t bytes) {
  MappableAllocation a;
  return p != nullptr && anyMappable() && findMappable(p, bytes, &a);
}

// The answer costs one arrival of every rank, a cache line's round trip,
// on a call of 512 KiB or more, which takes tens of microseconds at least.
Status SharedMemoryNode::mappedEverywhere(const CollectiveContext& node, size_t bytes, bool mine, bool* every) {
  *every = false;
  if (!asksWhetherMapped(bytes)) return Status::ok();
  FW_RETURN_IF_ERROR(beginRound(node, kMappedCheck, -1, bytes, 0));
  control(localRank_).buffersMapped[round_ % 2].store(mine ? 1 : 0, std::memory_order_relaxed);
  arrive();
  const Status st = awaitAllArrivals();  // finished is implied, as in a barrier
  bool all = st.isOk();
  for (int p = 0; p < ranks_ && all; ++p) all = control(p).buffersMapped[round_ % 2].load(std::memory_order_relaxed) != 0;
  ++round_;
  *every = all;
  return st;
}

void SharedMemoryNode::publishBuffer(uint32_t parity, const void* p) {
  Control& mine = control(localRank_);
  publish(mine.userBuffer[parity], mine.bufferAllocation[parity], p);
}

void SharedMemoryNode::publishResult(uint32_t parity, const void* p) {
  Control& mine = control(localRank_);
  publish(mine.userResult[parity], mine.resultAllocation[parity], p);
}

// The owner published the allocation with the address, before arriving;
// its id is taken first and the rest only where it names one.
uint64_t SharedMemoryNode::peerBuffer(int peer, uint32_t parity) {
  const Control& theirs = control(peer);
  const uint64_t address = theirs.userBuffer[parity].load(std::memory_order_relaxed);
  adoptAllocation(peer, 0, theirs.bufferAllocation[parity]);
  return address;
}

uint64_t SharedMemoryNode::peerResult(int peer, uint32_t parity) {
  const Control& theirs = control(peer);
  const uint64_t address = theirs.userResult[parity].load(std::memory_order_relaxed);
  adoptAllocation(peer, 1, theirs.resultAllocation[parity]);
  return address;
}

void SharedMemoryNode::adoptAllocation(int peer, int which, const PublishedAllocation& published) {
  MappableAllocation a;
  if (peer != localRank_) a.id = published.id.load(std::memory_order_relaxed);
  if (a.id != 0) {
    a.base = published.base.load(std::memory_order_relaxed);
    a.bytes = published.bytes.load(std::memory_order_relaxed);
    a.inode = published.inode.load(std::memory_order_relaxed);
    a.fd = static_cast<int>(published.fd.load(std::memory_order_relaxed));
  }
  peers_.adopt(peer, which, a);
}

// One round of single-copy reads: this rank publishes `published` (and
// whether it is also its output), runs stage (which may fill inputBytes
// of its input area: every rank of the node passes the same inputBytes,
// so their rings stay in step), runs copyOwn while its peers read from
// it, reads from each peer's published address (readFrom(q, address); the
// next peer first, so ranks do not all read one at once), and returns only
// once every peer has read from it.
template <typename Stage, typename CopyOwn, typename ReadFrom>
Status SharedMemoryNode::singleCopyRound(const CollectiveContext& node, Kind kind, uint64_t count,
                                         const void* published, bool publishedIsOutput, size_t inputBytes,
                                         Stage stage, CopyOwn copyOwn, ReadFrom readFrom) {
  FW_RETURN_IF_ERROR(beginRound(node, kind, -1, count, inputBytes));
  Control& mine = control(localRank_);
  publishBuffer(round_ % 2, published);
  mine.publishedInPlace[round_ % 2].store(publishedIsOutput ? 1 : 0, std::memory_order_relaxed);
  stage();
  arrive();
  FW_RETURN_IF_ERROR(copyOwn());
  for (int step = 1; step < ranks_; ++step) {
    const int q = (localRank_ + step) % ranks_;
    FW_RETURN_IF_ERROR(awaitArrival(q));
    FW_RETURN_IF_ERROR(readFrom(q, peerBuffer(q, round_ % 2)));
  }
  post(finished(round_));
  Status st = awaitAll(finished(round_));
  ++round_;
  return st;
}

// Every rank publishes its send buffer and reads its own block of each
// peer's from there (out of place into a buffer that streams, through a
// bounce buffer: PeerMemory::readThrough). In place (send == recv) this rank's
// block for q lies where q's block for it must land:
// - where the windows stage blocks of this size (alltoallStagedBlockBytes),
//   the rank copies its blocks into its input area first, its peers read
//   them from there with plain copies, and it reads every peer's block
//   straight into place;
// - else, with a peer in place too, the two swap those blocks, each doing
//   one half (the lower rank the first) through a bounce buffer that
//   stays in the cache: read the peer's piece into it, write this rank's
//   piece into the peer's place, copy the bounce buffer into this rank's
//   place. Each byte is read and written once, the work split evenly, and
//   no rank waits for another's reads before writing its own buffer;
// - with a peer out of place (a rank's call may be either), that peer
//   reads the block where it lies, so the block read from it lands in the
//   staging area and goes into place once every peer has read.
Status SharedMemoryNode::alltoallInPlace(CollectiveContext& node, const void* send, void* recv, size_t blockCount) {
  const size_t es = node.elementSize();
  const size_t bytes = blockCount * es;
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  const bool inPlace = send == recv;
  const bool staged = bytes <= alltoallStagedBlockBytes();
  if (!inPlace || staged) {
    const auto peerStaged = [&](int q) {
      return staged && control(q).publishedInPlace[round_ % 2].load(std::memory_order_relaxed) != 0;
    };
    // Out of place into a buffer past the caches, every block streams.
    const bool streaming = !inPlace && streams(bytes * static_cast<size_t>(ranks_));
    char* bounce = streaming ? node.stagingBytes(PeerMemory::kStreamedPieceBytes) : nullptr;
    return singleCopyRound(
        node, kAlltoallInPlace, blockCount, send, inPlace, staged ? bytes * static_cast<size_t>(ranks_) : 0,
        [&] {
          if (!inPlace) return;
          char* area = input(localRank_);
          for (int q = 0; q < ranks_; ++q) {
            if (q != localRank_) segmentCopy(area + q * bytes, in + q * bytes, bytes);
          }
        },
        [&] {
          if (!inPlace) resultCopy(out + localRank_ * bytes, in + localRank_ * bytes, bytes, streaming);
          return Status::ok();
        },
        [&](int q, uint64_t theirs) {
          if (peerStaged(q)) {
            resultCopy(out + q * bytes, input(q) + localRank_ * bytes, bytes, streaming);
            return Status::ok();
          }
          return peers_.readThrough(q, out + q * bytes, theirs + localRank_ * bytes, bytes, bounce);
        });
  }
  const size_t half = blockCount / 2 * es;
  const size_t bounceBytes = std::min(kSwapPieceBytes, std::max(half, bytes - half));
  char* bounce = node.stagingBytes(bounceBytes + bytes * static_cast<size_t>(ranks_));
  char* landed = bounce + bounceBytes;
  std::fill(landedFrom_.begin(), landedFrom_.end(), 0);
  FW_RETURN_IF_ERROR(singleCopyRound(
      node, kAlltoallInPlace, blockCount, send, true, 0, [] {}, [] { return Status::ok(); },
      [&](int q, uint64_t theirs) {
        const uint64_t theirBlock = theirs + localRank_ * bytes;
        if (control(q).publishedInPlace[round_ % 2].load(std::memory_order_relaxed) == 0) {
          landedFrom_[q] = 1;
          return peers_.read(q, landed + q * bytes, theirBlock, bytes);
        }
        const size_t first = localRank_ < q ? 0 : half;
        const size_t end = localRank_ < q ? half : bytes;
        char* ours = out + q * bytes;
        for (size_t at = first; at < end; at += bounceBytes) {
          const size_t piece = std::min(bounceBytes, end - at);
          FW_RETURN_IF_ERROR(peers_.read(q, bounce, theirBlock + at, piece));
          FW_RETURN_IF_ERROR(peers_.write(q, theirBlock + at, ours + at, piece));
          segmentCopy(ours + at, bounce, piece);
        }
        return Status::ok();
      }));
  for (int q = 0; q < ranks_; ++q) {
    if (landedFrom_[q] != 0) resultCopy(out + q * bytes, landed + q * bytes, bytes, false);
  }
  return Status::ok();
}

// Every rank publishes its send and recv buffers; rank r reduces slice r
// of every rank's send (the peers' read through a bounce buffer that
// stays in the cache, a piece at a time) straight into its recv, posts
// that, and reads every peer's slice of the result from the peer's recv;
// a second round tells the peers that it has read. Each byte of the
// peers' inputs and results crosses once, where the segment's rounds
// copy every input in and every result out. The combined bits are
// computed once, in rank order, so every rank gets the same ones. In
// place, slice r of send is overwritten only with its own reduction, and
// a peer's slice only once that peer has posted (it has read it).
Status SharedMemoryNode::allreduceInPlace(CollectiveContext& node, const void* send, void* recv, size_t count) {
  const size_t es = node.elementSize();
  const ChunkLayout slices{count, ranks_, 0};
  const size_t ownAt = slices.chunkOffset(localRank_) * es;
  const size_t ownBytes = slices.chunkCount(localRank_) * es;
  char* out = static_cast<char*>(recv);
  FW_RETURN_IF_ERROR(beginRound(node, kAllreduceInPlace, -1, count, 0));
  publishBuffer(round_ % 2, send);
  publishResult(round_ % 2, recv);
  arrive();
  FW_RETURN_IF_ERROR(awaitAllArrivals());
  for (int p = 0; p < ranks_; ++p) peerBlocks_[p] = peerBuffer(p, round_ % 2);
  // Its slice stays in the cache: the peers read it next.
  FW_RETURN_IF_ERROR(
      combineFromPeers(node, ownAt, static_cast<const char*>(send) + ownAt, out + ownAt, ownBytes, false));
  post(finished(round_));
  for (int step = 1; step < ranks_; ++step) {
    const int q = (localRank_ + step) % ranks_;
    FW_RETURN_IF_ERROR(await(q, finished(round_)));
    const size_t at = slices.chunkOffset(q) * es;
    const uint64_t theirs = peerResult(q, round_ % 2);
    FW_RETURN_IF_ERROR(peers_.read(q, out + at, theirs + at, slices.chunkCount(q) * es));
  }
  ++round_;
  return awaitPeersDone(node, kAllreduceInPlace, count);
}

// The rounds of reduceInRounds with no input copied into the segment:
// rank r reads slice r of the round from every peer's send in place
// (combineFromPeers) and combines it into its result area, from which
// every rank copies it out as in the rounds. Each rank publishes its send
// buffer in the first round; a peer's reads of round g end before it
// posts finished(g), which every rank waits for before copying that
// round's results out, so none returns while a peer may still read it.
Status SharedMemoryNode::allreduceReadingInputs(CollectiveContext& node, const void* send, void* recv, size_t count) {
  const size_t es = node.elementSize();
  const bool streaming = streams(count * es) && !overlaps(send, recv, count * es);
  const size_t perRound = chunkBytes_ / es;
  for (size_t first = 0; first < count; first += perRound, ++round_) {
    const size_t length = std::min(perRound, count - first);
    FW_RETURN_IF_ERROR(beginRound(node, kAllreduceReadingInputs, -1, count, 0));
    if (first == 0) {
      publishBuffer(round_ % 2, send);
    }
    arrive();
    FW_RETURN_IF_ERROR(awaitAllArrivals());
    if (first == 0) {
      for (int p = 0; p < ranks_; ++p) {
        peerBlocks_[p] = peerBuffer(p, round_ % 2);
      }
    }
    const ChunkLayout slices{length, ranks_, 0};
    const size_t ownAt = (first + slices.chunkOffset(localRank_)) * es;
    FW_RETURN_IF_ERROR(combineFromPeers(node, ownAt, static_cast<const char*>(send) + ownAt, result(localRank_, round_),
                                        slices.chunkCount(localRank_) * es, false));
    post(finished(round_));
    FW_RETURN_IF_ERROR(copyResultsOut(node, recv, first, slices, streaming));
  }
  return Status::ok();
}

// Every rank publishes where its blocks lie: the base of a buffer cut by
// the layout every rank shares, or (the list form, blocks anywhere) the
// address of its list, from which a peer reads the one entry it needs.
// Rank r reduces block r of every rank's input straight into out
// (combineFromPeers); a second round tells the peers it has read, as they
// may not return before. The peers' blocks cross once, where the rounds
// copy each into the segment first.
Status SharedMemoryNode::reduceScatterInPlace(CollectiveContext& node, const InputBlocks& in, void* out) {
  const size_t es = node.elementSize();
  const ChunkLayout& blocks = in.layout();
  FW_RETURN_IF_ERROR(beginRound(node, kReduceScatterInPlace, -1, blocks.count, 0));
  Control& mine = control(localRank_);
  const uint32_t parity = round_ % 2;
  publishBuffer(parity, in.at(0, 0));
  mine.userBlockList[parity].store(reinterpret_cast<uintptr_t>(in.list()), std::memory_order_relaxed);
  arrive();
  FW_RETURN_IF_ERROR(awaitAllArrivals());
  for (int p = 0; p < ranks_; ++p) {
    if (p == localRank_) continue;
    const uint64_t base = peerBuffer(p, parity);
    const uint64_t list = control(p).userBlockList[parity].load(std::memory_order_relaxed);
    if (list == 0) {
      peerBlocks_[p] = base + blocks.chunkOffset(localRank_) * es;
    } else {
      const uint64_t entry = list + static_cast<uint64_t>(localRank_) * sizeof(const char*);
      FW_RETURN_IF_ERROR(peers_.read(p, &peerBlocks_[p], entry, sizeof(uint64_t)));
    }
  }
  // Into an output that streams (not this rank's own block: in place its
  // lines are in the cache, just read), through a cache-resident piece.
  // 2 ranks out of place, us a call, medians of 8 runs in ABBA order,
  // stored directly against streamed: 8 MiB 1,756 against 1,530, 16 MiB
  // 3,698 against 3,443, 64 MiB 14,893 against 12,526.
  const char* own = in.at(localRank_, 0);
  const size_t ownBytes = blocks.chunkCount(localRank_) * es;
  const bool streaming = streams(ownBytes) && !overlaps(own, out, ownBytes);
  FW_RETURN_IF_ERROR(combineFromPeers(node, 0, own, static_cast<char*>(out), ownBytes, streaming));
  post(finished(round_));
  ++round_;
  return awaitPeersDone(node, kReduceScatterInPlace, blocks.count);
}

// dst = every rank's block in rank order, this rank's at own, each
// peer's `from` bytes past peerBlocks_[p] in its address space: the
// peers' read a piece at a time into a bounce buffer that stays in the
// cache (kReducePieceBytes each). A rank from 2 on whose dst overlaps own
// (in place) would overwrite own before the rank-order combine reads it:
// own passes through the bounce buffer too. streaming: each piece is
// combined in the cache and goes on to dst with streaming stores.
Status SharedMemoryNode::combineFromPeers(CollectiveContext& node, size_t from, const char* own, char* dst,
                                          size_t bytes, bool streaming) {
  const size_t es = node.elementSize();
  const size_t piece = std::max<size_t>(kReducePieceBytes / es, 1) * es;
  char* bounce = node.stagingBytes(piece * static_cast<size_t>(ranks_ + (streaming ? 1 : 0)));
  char* combined = bounce + static_cast<size_t>(ranks_) * piece;
  const bool ownThroughBounce = overlaps(own, dst, bytes) && (own != dst || localRank_ >= 2);
  // A peer's block in an allocation mapped here is combined where it lies.
  views_.assign(static_cast<size_t>(ranks_), nullptr);
  for (int p = 0; p < ranks_; ++p) {
    if (p != localRank_) views_[p] = peers_.viewOf(p, peerBlocks_[p] + from, bytes);
  }
  for (size_t at = 0; at < bytes; at += piece) {
    const size_t length = std::min(piece, bytes - at);
    for (int p = 0; p < ranks_; ++p) {
      char* staged = bounce + static_cast<size_t>(p) * piece;
      if (p != localRank_) {
        if (views_[p] == nullptr) FW_RETURN_IF_ERROR(peers_.read(p, staged, peerBlocks_[p] + from + at, length));
      } else if (ownThroughBounce) {
        segmentCopy(staged, own + at, length);
      }
    }
    char* target = streaming ? combined : dst + at;
    combineInRankOrder(node, ranks_, target, length / es, [&](int p) -> const char* {
      if (p == localRank_) return ownThroughBounce ? bounce + static_cast<size_t>(p) * piece : own + at;
      return views_[p] != nullptr ? views_[p] + at : bounce + static_cast<size_t>(p) * piece;
    });
    node.reducer().finalize(target, length / es);
    if (streaming) resultCopy(dst + at, combined, length, true);
  }
  return Status::ok();
}

// A round in which every rank arrives once it has read all it reads of
// its peers' buffers: none returns (and lets its caller reuse them) before.
Status SharedMemoryNode::awaitPeersDone(CollectiveContext& node, Kind kind, uint64_t count) {
  FW_RETURN_IF_ERROR(beginRound(node, kind, -1, count, 0));
  arrive();
  Status st = awaitAllArrivals();  // finished is implied, as a barrier's
  ++round_;
  return st;
}

// Every rank publishes its block and reads each peer's. Out of place the
// block published is the caller's own, so peers read it while this rank
// copies it into its place in out; a block partly overlapping its place
// is copied first and published there.
Status SharedMemoryNode::allgatherInPlace(CollectiveContext& node, const void* own, const OutputBlocks& out) {
  const size_t es = node.elementSize();
  const ChunkLayout& blocks = out.layout();
  char* ownInOut = out.at(localRank_, 0);
  const size_t ownCount = blocks.chunkCount(localRank_);
  const bool copyFirst = own != ownInOut && overlaps(own, ownInOut, ownCount * es);
  if (copyFirst) FW_RETURN_IF_ERROR(node.copy(ownInOut, own, ownCount));
  const void* published = copyFirst ? ownInOut : own;
  // Out of place into a buffer that streams, the blocks go past the cache
  // as all-to-all's do (PeerMemory::readThrough). 2 ranks, medians of 8 runs in
  // ABBA order, us a call: 4 MiB 1,149 to 762 and 8 MiB 2,659 to 2,032
  // between near cores, 1,051 to 796 and 2,736 to 1,941 between far ones.
  // In place they measured the same or slower (4 MiB 378 to 487): the
  // output is where the rank's own block already lies in the cache.
  const bool streaming = own != ownInOut && streams(blocks.count * es);
  char* bounce = streaming ? node.stagingBytes(PeerMemory::kStreamedPieceBytes) : nullptr;
  return singleCopyRound(
      node, kAllgatherInPlace, blocks.count, published, false, 0, [] {},
      [&] {
        if (published == ownInOut) return Status::ok();
        if (!streaming) return node.copy(ownInOut, own, ownCount);
        resultCopy(ownInOut, own, ownCount * es, true);
        return Status::ok();
      },
      [&](int q, uint64_t theirs) {
        return peers_.readThrough(q, out.at(q, 0), theirs, blocks.chunkCount(q) * es, bounce);
      });
}

// The root publishes `published` (its send buffer out of place, buf in
// place) and, out of place, copies it into buf while the others read all
// of it from there. In place the root has nothing of its own to copy, so
// it shares the readers' work: it writes the tail of each reader's buffer
// (rootShareOf: one n-th of it) while that reader reads the rest, every
// rank moving (n - 1)/n of the buffer instead of each reader all of it
// and the root none (2 ranks: both cores copy half at once). A reader then
// returns only once the root has written its share.
Status SharedMemoryNode::broadcastInPlace(CollectiveContext& node, const void* published, void* buf, size_t count,
                                          int root) {
  const size_t es = node.elementSize();
  const size_t total = count * es;
  const size_t rootShare = count / static_cast<size_t>(ranks_) * es;
  FW_RETURN_IF_ERROR(beginRound(node, kBroadcastInPlace, root, count, 0));
  Control& mine = control(localRank_);
  const bool rootInPlace = published == buf;
  publishBuffer(round_ % 2, published);
  mine.publishedInPlace[round_ % 2].store(rootInPlace ? 1 : 0, std::memory_order_relaxed);
  arrive();
  Status st;
  if (localRank_ != root) {
    st = awaitArrival(root);
    const bool rootWrites = st.isOk() && control(root).publishedInPlace[round_ % 2].load(std::memory_order_relaxed) != 0;
    const size_t readBytes = rootWrites ? total - rootShare : total;
    if (st.isOk()) st = peers_.read(root, buf, peerBuffer(root, round_ % 2), readBytes);
    if (st.isOk()) post(finished(round_));
    if (st.isOk() && rootWrites) st = await(root, finished(round_));
  } else {
    if (!rootInPlace) {
      st = node.copy(buf, published, count);
    } else if (rootShare > 0) {
      // Each reader's tail as it arrives, the next rank first, so that
      // with more readers than one they are not all written at once.
      const char* tail = static_cast<const char*>(buf) + (total - rootShare);
      for (int step = 1; step < ranks_ && st.isOk(); ++step) {
        const int q = (localRank_ + step) % ranks_;
        st = awaitArrival(q);
        if (st.isOk()) {
          st = peers_.write(q, peerBuffer(q, round_ % 2) + (total - rootShare),
                         tail, rootShare);
        }
      }
    }
    // Out of place a failed copy of the root's own leaves the readers'
    // results whole; a failed write does not, and its readers are left
    // to time out naming the root rather than return its share unwritten.
    if (st.isOk() || !rootInPlace) post(finished(round_));
    const Status read = st.isOk() || !rootInPlace ? awaitAll(finished(round_)) : Status::ok();
    if (st.isOk()) st = read;
  }
  ++round_;
  return st;
}

}  // namespace fairway
