// The shared-memory provider's collectives, in rounds of at most one chunk
// per rank (shm_node.h). Round g's input region never overlaps round
// g - 1's, and it uses the result areas of parity g % 2, so a rank fills
// round g + 1 while slower peers still read round g; a round whose region
// no recent round used (a broadcast's, walking the ring) waits for no
// peer at all (beginRound).
#include <algorithm>
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/context.h"
#include "providers/shm/shm_copy.h"
#include "providers/shm/shm_node.h"

namespace fairway {
namespace {

// Up to this size every rank reduces the whole buffer from every input
// itself: one synchronisation instead of two (the split reduction's
// hand-over of slices), at the price of reading every input.
constexpr size_t kReduceEverywhereBytes = 16 * 1024;
// Of a small round's peer inputs, this much is prefetched before combining.
constexpr size_t kPrefetchBytes = 4096;

// Rounds needed to move `longest` elements, `perRound` at a time.
size_t roundsFor(size_t longest, size_t perRound) { return (longest + perRound - 1) / perRound; }

// Elements [first, first + perRound) of a chunk of `count`, clipped.
size_t pieceOf(size_t count, size_t first, size_t perRound) {
  return first >= count ? 0 : std::min(perRound, count - first);
}

// The most elements any block has in round [first, first + perRound):
// chunk 0 is the longest of a ChunkLayout.
size_t longestPiece(const ChunkLayout& blocks, size_t first, size_t perRound) {
  return pieceOf(blocks.chunkCount(0), first, perRound);
}

}  // namespace

void SharedMemoryNode::reduceSlices(const CollectiveContext& node, char* dst, size_t at, size_t count,
                                    const char* own) const {
  combineInRankOrder(node, ranks_, dst, count, [&](int p) -> const char* {
    return p == localRank_ && own != nullptr ? own : input(p) + at;
  });
}

// Round: everyone's piece in (but for the slice it reduces itself); rank r
// reduces slice r of the round into its result area; every rank copies all
// slices out. The combined bits are computed once, so every rank gets the
// same ones.
Status SharedMemoryNode::allreduce(CollectiveContext& node, const void* send, void* recv, size_t count) {
  return reduceInRounds(node, send, recv, count, -1);
}

// As allreduce, with only the root copying the result out.
Status SharedMemoryNode::reduce(CollectiveContext& node, const void* send, void* recv, size_t count, int root) {
  return reduceInRounds(node, send, recv, count, root);
}

// allreduce (root < 0) or reduce.
Status SharedMemoryNode::reduceInRounds(CollectiveContext& node, const void* send, void* recv, size_t count,
                                        int root) {
  FW_RETURN_IF_ERROR(enterCall(node));
  const size_t es = node.elementSize();
  if (count > 0 && count * es <= kInlineBytes) return reduceInline(node, send, recv, count, root);
  if (count > 0 && count * es <= std::min(kReduceEverywhereBytes, chunkBytes_)) {
    return reduceEverywhere(node, send, recv, count, root);
  }
  // With more than 2 ranks in the window too: its rounds read the peers'
  // inputs in place but pass the results through the segment, where
  // allreduceMapped writes each once (4 ranks on 2 cores, mapped buffers,
  // us a call, medians of 6 ABBA runs: 4 MiB 2,087 to 1,571 out of place
  // and 2,855 to 1,404 in place, 16 MiB 8,318 to 6,284 and 11,422 to
  // 5,816). On 2 ranks the window's path stays: there it reads the
  // peer's results once, in the cache (2 MiB in place 105 against 215).
  if (root < 0 && (ranks_ > 2 || !singleCopy_.allreduce.holds(count * es))) {
    bool mappedPeers = false;
    const bool mine = asksWhetherMapped(count * es) && mapped(send, count * es) && mapped(recv, count * es);
    FW_RETURN_IF_ERROR(mappedEverywhere(node, count * es, mine, &mappedPeers));
    if (mappedPeers) return allreduceMapped(node, send, recv, count);
  }
  if (root < 0 && singleCopy_.allreduce.holds(count * es)) {
    // Two ranks each read the other's slice of the result once; with more,
    // the results come from the segment, as in the rounds (4 ranks on 2
    // cores, 16 MiB out of place, us a call, near cores: 14,784 reading
    // the results against 14,657 in rounds in one run, 12,113 from the
    // segment against 15,170 in another).
    return ranks_ == 2 ? allreduceInPlace(node, send, recv, count) : allreduceReadingInputs(node, send, recv, count);
  }
  const bool copiesOut = root < 0 || localRank_ == root;
  // In place, the result goes where this rank's copy-in just read: those
  // lines are in cache, and ordinary stores win.
  const bool streaming = streams(count * es) && !overlaps(send, recv, count * es);
  const size_t perRound = chunkBytes_ / es;
  for (size_t first = 0; first < count; first += perRound, ++round_) {
    const size_t length = std::min(perRound, count - first);
    FW_RETURN_IF_ERROR(beginRound(node, root < 0 ? kAllreduce : kReduce, root, count, length * es));
    // Peers need the slices they reduce; this rank's own slice it reads
    // where it lies, so only the bytes around it go in.
    const ChunkLayout slices{length, ranks_, 0};
    const size_t ownAt = slices.chunkOffset(localRank_) * es;
    const size_t sliceCount = slices.chunkCount(localRank_);
    const char* piece = static_cast<const char*>(node.at(send, first));
    char* in = input(localRank_);
    segmentCopy(in, piece, ownAt);
    segmentCopy(in + ownAt + sliceCount * es, piece + ownAt + sliceCount * es, (length - sliceCount) * es - ownAt);
    arrive();
    FW_RETURN_IF_ERROR(awaitAllArrivals());
    char* mine = result(localRank_, round_);
    reduceSlices(node, mine, ownAt, sliceCount, piece + ownAt);
    node.reducer().finalize(mine, sliceCount);
    post(finished(round_));
    if (copiesOut) FW_RETURN_IF_ERROR(copyResultsOut(node, recv, first, slices, streaming));
  }
  return Status::ok();
}

// This rank's own slice first: its copy needs no wait and covers the
// peers' last reductions.
Status SharedMemoryNode::copyResultsOut(const CollectiveContext& node, void* recv, size_t first,
                                        const ChunkLayout& slices, bool streaming) {
  const size_t es = node.elementSize();
  for (int step = 0; step < ranks_; ++step) {
    const int q = (localRank_ + step) % ranks_;
    if (step > 0) FW_RETURN_IF_ERROR(await(q, finished(round_)));
    resultCopy(node.at(recv, first + slices.chunkOffset(q)), result(q, round_), slices.chunkCount(q) * es, streaming);
  }
  return Status::ok();
}

// Small buffers in one round: every input in, then each rank that needs
// the result (all, or root only) combines all of them in rank order: the
// same bits everywhere, and no second hand-over.
Status SharedMemoryNode::reduceEverywhere(CollectiveContext& node, const void* send, void* recv, size_t count,
                                          int root) {
  const size_t es = node.elementSize();
  FW_RETURN_IF_ERROR(beginRound(node, root < 0 ? kAllreduce : kReduce, root, count, count * es));
  segmentCopy(input(localRank_), send, count * es);
  arrive();
  if (root < 0 || localRank_ == root) {
    FW_RETURN_IF_ERROR(awaitAllArrivals());
    // The peers' lines requested together rather than one after another
    // as the combine reaches them (2-rank 256 B-1 KiB allreduce 0.37-0.45
    // to 0.33-0.41 us; no difference past 4 KiB, nor on 4 and 8 ranks).
    for (int p = 0; p < ranks_; ++p) {
      if (p == localRank_) continue;
      const char* in = input(p);
      for (size_t at = 0; at < std::min(count * es, kPrefetchBytes); at += 64) __builtin_prefetch(in + at, 0, 3);
    }
    reduceSlices(node, static_cast<char*>(recv), 0, count);
    node.reducer().finalize(recv, count);
  }
  if (root >= 0) post(finished(round_));  // an allreduce's is implied (shm_node.h)
  ++round_;
  return Status::ok();
}

// As reduceEverywhere, with the inputs on the inline lines of the round's
// parity instead of the input areas.
Status SharedMemoryNode::reduceInline(CollectiveContext& node, const void* send, void* recv, size_t count,
                                      int root) {
  const size_t es = node.elementSize(), bytes = count * es;
  FW_RETURN_IF_ERROR(beginRound(node, root < 0 ? kAllreduce : kReduce, root, count, 0));
  InlineRound& mine = control(localRank_).inlineRound[round_ % 2];
  const size_t headBytes = std::min(bytes, kInlineHeadBytes);
  const bool withTail = bytes > headBytes;
  mine.descriptor = current_;
  std::memcpy(mine.head, send, headBytes);
  if (withTail) {
    std::memcpy(mine.tail, static_cast<const char*>(send) + headBytes, bytes - headBytes);
    mine.tailRound.store(round_, std::memory_order_release);
  }
  mine.round.store(round_, std::memory_order_release);
  arrive();
  if (root < 0 || localRank_ == root) {
    for (int p = 0; p < ranks_; ++p) {
      if (p != localRank_) FW_RETURN_IF_ERROR(awaitInline(p, withTail));
    }
    // The head's elements, then the tail's (kInlineHeadBytes is a whole
    // number of elements of every type). This rank's own input is read
    // from its lines too: in place, recv is written before rank 2 on reads.
    const size_t headCount = headBytes / es;
    const uint32_t parity = round_ % 2;
    auto part = [&](size_t first, size_t length, bool tail) {
      combineInRankOrder(node, ranks_, static_cast<char*>(recv) + first * es, length, [&](int p) -> const char* {
        const InlineRound& theirs = control(p).inlineRound[parity];
        return tail ? theirs.tail : theirs.head;
      });
    };
    part(0, headCount, false);
    part(headCount, count - headCount, true);
    node.reducer().finalize(recv, count);
  }
  if (root >= 0) post(finished(round_));  // an allreduce's is implied (shm_node.h)
  ++round_;
  return Status::ok();
}

Status SharedMemoryNode::reduceScatter(CollectiveContext& node, const void* send, void* out,
                                       const ChunkLayout& blocks, void* /*partial*/) {
  return reduceScatterFrom(node, InputBlocks(static_cast<const char*>(send), blocks, node.elementSize()), out);
}

// Round j carries elements [j k, (j + 1) k) of every block, block q's
// piece at q times the round's longest piece in the rank's input (its own
// piece it reads where it lies); rank r reduces piece r straight into out.
// Blocks may sit at a stride (two-phase reads them in place) or at
// addresses of their own (the list form).
Status SharedMemoryNode::reduceScatterFrom(CollectiveContext& node, const InputBlocks& in, void* out) {
  FW_RETURN_IF_ERROR(enterCall(node));
  const size_t es = node.elementSize();
  const ChunkLayout& blocks = in.layout();
  if (singleCopy_.reduceScatter.holds(blocks.count * es)) return reduceScatterInPlace(node, in, out);
  bool mappedPeers = false;
  const bool mine =
      asksWhetherMapped(blocks.count * es) && in.list() == nullptr && mapped(in.at(0, 0), blocks.count * es);
  FW_RETURN_IF_ERROR(mappedEverywhere(node, blocks.count * es, mine, &mappedPeers));
  if (mappedPeers) return reduceScatterInPlace(node, in, out);
  const size_t perRound = chunkBytes_ / es / static_cast<size_t>(ranks_);
  const size_t rounds = roundsFor(blocks.chunkCount(0), perRound);
  for (size_t j = 0; j < rounds; ++j, ++round_) {
    const size_t first = j * perRound;
    const size_t stride = longestPiece(blocks, first, perRound) * es;
    FW_RETURN_IF_ERROR(beginRound(node, kReduceScatter, -1, blocks.count, stride * ranks_));
    const size_t mine = pieceOf(blocks.chunkCount(localRank_), first, perRound);
    char* dst = static_cast<char*>(node.at(out, first));
    const char* own = in.at(localRank_, first);
    // This rank's piece is read where it lies, unless out overlaps it and
    // a combine would overwrite it before reading it: in place on a rank
    // past the first two (its first combine writes out), or out shifted
    // against it (an element written before it is read).
    const bool ownInPlace = overlaps(own, dst, mine * es) && (own != dst || localRank_ >= 2);
    char* area = input(localRank_);
    for (int q = 0; q < ranks_; ++q) {
      if (q == localRank_ && !ownInPlace) continue;
      segmentCopy(area + q * stride, in.at(q, first), pieceOf(blocks.chunkCount(q), first, perRound) * es);
    }
    arrive();
    FW_RETURN_IF_ERROR(awaitAllArrivals());
    reduceSlices(node, dst, localRank_ * stride, mine, ownInPlace ? nullptr : own);
    node.reducer().finalize(dst, mine);
    post(finished(round_));
  }
  return Status::ok();
}

// buf holds this rank's block of `blocks`; round j carries elements
// [j k, (j + 1) k) of every block.
Status SharedMemoryNode::allgather(CollectiveContext& node, void* buf, const ChunkLayout& blocks) {
  return allgatherFrom(node, node.at(buf, blocks.chunkOffset(localRank_)), buf, blocks);
}

Status SharedMemoryNode::allgatherFrom(CollectiveContext& node, const void* own, void* buf,
                                       const ChunkLayout& blocks) {
  return allgatherInto(node, own, OutputBlocks(static_cast<char*>(buf), blocks, node.elementSize()));
}

// Each round's piece of this rank's block goes from own into the segment
// and, unless it already lies there, into its place in out: after the
// round is posted, while the peers copy it out, or once results stream
// past the caches in the same pass (as broadcast's root does). The peers'
// pieces go from the segment straight to their blocks. Posting before the
// second copy measured faster at every size that does not stream, busbw
// GB/s: 4 ranks on 2 cores 128 KiB 2.2-2.4 to 4.5-4.6, 256 KiB 3.4-4.0 to
// 6.0, 1-4 MiB 3.1-3.5 to 3.9-4.5; 8 ranks 512 KiB 2.5-2.6 to 3.0-3.1;
// 2 ranks in rounds (single copies off) 64 KiB 3.7 to 4.3-6.4, 1 MiB 3.7
// to 5.6-5.7.
Status SharedMemoryNode::allgatherInto(CollectiveContext& node, const void* own, const OutputBlocks& out) {
  FW_RETURN_IF_ERROR(enterCall(node));
  const size_t es = node.elementSize();
  const ChunkLayout& blocks = out.layout();
  char* ownInOut = out.at(localRank_, 0);
  if (singleCopy_.allgather.holds(blocks.chunkCount(0) * es)) return allgatherInPlace(node, own, out);
  // Peers write into this rank's output (allgatherMapped).
  bool mappedPeers = false;
  const size_t outBytes = (blocks.chunkOffset(ranks_ - 1) + blocks.chunkCount(ranks_ - 1)) * es;
  const bool mine = asksWhetherMapped(blocks.chunkCount(0) * es) && out.list() == nullptr &&
                    mapped(out.at(0, 0), outBytes);
  FW_RETURN_IF_ERROR(mappedEverywhere(node, blocks.chunkCount(0) * es, mine, &mappedPeers));
  if (mappedPeers) return allgatherMapped(node, own, out);
  const size_t perRound = chunkBytes_ / es;
  const size_t rounds = roundsFor(blocks.chunkCount(0), perRound);
  const bool streaming = streams(blocks.count * es);
  const bool copyOwnAfter = own != ownInOut && !streaming;
  for (size_t j = 0; j < rounds; ++j, ++round_) {
    const size_t first = j * perRound;
    FW_RETURN_IF_ERROR(beginRound(node, kAllgather, -1, blocks.count, longestPiece(blocks, first, perRound) * es));
    const size_t bytes = pieceOf(blocks.chunkCount(localRank_), first, perRound) * es;
    char* in = shiftedInput(node.at(ownInOut, first), bytes);
    if (own == ownInOut || copyOwnAfter) {
      segmentCopy(in, node.at(own, first), bytes);
    } else {
      segmentCopyTwice(in, node.at(ownInOut, first), node.at(own, first), bytes, streaming);
    }
    arrive();
    if (copyOwnAfter) resultCopy(node.at(ownInOut, first), node.at(own, first), bytes, false);
    for (int step = 1; step < ranks_; ++step) {
      const int q = (localRank_ + step) % ranks_;
      FW_RETURN_IF_ERROR(awaitArrival(q));
      const char* theirs = nullptr;
      FW_RETURN_IF_ERROR(peerInput(q, &theirs));
      resultCopy(out.at(q, first), theirs, pieceOf(blocks.chunkCount(q), first, perRound) * es, streaming);
    }
    post(finished(round_));
  }
  return Status::ok();
}

// buf holds the data on root and receives it everywhere else.
Status SharedMemoryNode::broadcast(CollectiveContext& node, void* buf, size_t count, int root) {
  return broadcastFrom(node, buf, buf, count, root);
}

// Every round walks the input ring (RoundRing's walkAnySize), so the root,
// which waits for no reader, runs up to kRoundSlots rounds ahead of the
// others while they copy the rounds out: with rounds kept to the ring's
// halves it waited for the readers of round g - 2 before filling round g.
// 2 ranks with a CPU each, us a call: 1 KiB 0.42 to 0.31, 4 KiB 0.82 to
// 0.44, 8 KiB 1.1 to 0.65; 4 ranks on 2 cores: 1 KiB 1.8 to 0.62, 8 KiB
// 3.4 to 1.27, 16 KiB 5.5 to 2.5 (slots: 16 left 4 ranks at 0.8 us for
// 1 KiB, 256 measured as 64).
// Out of place the root never fills recv before the peers can read: once
// results stream past the caches it copies each piece of send into the
// segment and into recv in one pass (2 ranks: 16 MiB 8.3-8.8 GB/s busbw
// against 6.0 with recv filled first, 64 MiB 5.8-6.3 against 3.9); below
// that, where the two-destination pass measured slower (256 KiB 5.7-6.1
// against 12.1), it copies each piece into recv after posting it, while
// the peers copy it out (4 MiB 7.2-7.4 against 6.2-6.6, 1 MiB 8.8
// against 7.6-8.6, the rest unchanged).
Status SharedMemoryNode::broadcastFrom(CollectiveContext& node, const void* send, void* buf, size_t count,
                                       int root) {
  FW_RETURN_IF_ERROR(enterCall(node));
  const size_t es = node.elementSize();
  const bool readInPlace = singleCopy_.broadcast.holds(count * es);
  const bool streaming = streams(count * es);
  bool copyOnRoot = localRank_ == root && send != buf;
  // A send partly overlapping recv is copied first, as a piece written
  // into recv could be one still to be read from send.
  if (copyOnRoot && overlaps(send, buf, count * es)) {
    FW_RETURN_IF_ERROR(node.copy(buf, send, count));
    copyOnRoot = false;
  }
  // No agreement on mapped buffers past the window (mappedEverywhere):
  // its round holds a root that runs ahead of its readers back for the
  // slowest, which cost more than mapping gained (2 ranks, 1 MiB in place,
  // us a call, medians of 8 ABBA runs: 49.9 against 84.9; 4 ranks on 2
  // cores 512 KiB-4 MiB 1.18-1.59 times the rounds' time).
  if (readInPlace) return broadcastInPlace(node, copyOnRoot ? send : buf, buf, count, root);
  const bool copyAfter = copyOnRoot && !streaming;
  const size_t perRound = chunkBytes_ / es;
  for (size_t first = 0; first < count; first += perRound, ++round_) {
    const size_t length = std::min(perRound, count - first);
    FW_RETURN_IF_ERROR(beginRound(node, kBroadcast, root, count, length * es));
    if (localRank_ == root) {
      char* piece = node.at(buf, first);
      char* in = shiftedInput(piece, length * es);
      if (copyAfter) {
        segmentCopy(in, node.at(send, first), length * es);
      } else if (copyOnRoot) {
        segmentCopyTwice(in, piece, node.at(send, first), length * es, streaming);
      } else {
        segmentCopy(in, piece, length * es);
      }
    }
    arrive();
    if (copyAfter) resultCopy(node.at(buf, first), node.at(send, first), length * es, false);
    if (localRank_ != root) {
      FW_RETURN_IF_ERROR(awaitArrival(root));
      const char* theirs = nullptr;
      FW_RETURN_IF_ERROR(peerInput(root, &theirs));
      resultCopy(node.at(buf, first), theirs, length * es, streaming);
    }
    post(finished(round_));
  }
  return Status::ok();
}

// Round j carries elements [j k, (j + 1) k) of every block: this rank puts
// its piece of block q at q times the piece's size in its input area
// (its own block it copies straight to recv), and rank q copies piece q
// of every peer's input into its recv. Every block has blockCount elements.
// Blocks in the single-copy window are read (or, in place, swapped)
// straight from the owners' buffers instead (alltoallInPlace). Outside it,
// with more ranks than CPUs (the window left out, or ptrace refused),
// blocks from kAlltoallMessagesFromBytes go as the pairwise messages (UCX
// reads them once, CMA): measured on 4 ranks on 2 cores, 1-16 MiB
// all-to-alls 3.3-3.9 GB/s busbw that way against 2.7-3.2 in rounds.
// Every rank takes the same way whether its own call is in place or not
// (a peer cannot tell). In place (send == recv) the rounds need no
// staging: a round's piece j of every outgoing block is in the segment
// before piece j of an incoming one lands over it, and later rounds'
// pieces lie elsewhere. The messages would overwrite blocks a peer still
// reads, so there an in-place send is staged first.
Status SharedMemoryNode::alltoall(CollectiveContext& node, const void* send, void* recv, size_t blockCount) {
  FW_RETURN_IF_ERROR(enterCall(node));
  const size_t es = node.elementSize();
  const bool inPlace = send == recv;
  if (singleCopy_.alltoall.holds(blockCount * es)) return alltoallInPlace(node, send, recv, blockCount);
  bool mappedPeers = false;
  const bool mine = asksWhetherMapped(blockCount * es) && mapped(send, blockCount * es * ranks_);
  FW_RETURN_IF_ERROR(mappedEverywhere(node, blockCount * es, mine, &mappedPeers));
  if (mappedPeers) return alltoallInPlace(node, send, recv, blockCount);
  if (yieldWhenIdle_ && blockCount * es >= kAlltoallMessagesFromBytes) {
    return NodePhase::alltoall(node, send, recv, blockCount);  // stages an in-place send
  }
  const size_t perRound = chunkBytes_ / es / static_cast<size_t>(ranks_);
  const size_t rounds = roundsFor(blockCount, perRound);
  const bool streaming = streams(blockCount * es * static_cast<size_t>(ranks_));
  const auto at = [&](int q, size_t first) { return (static_cast<size_t>(q) * blockCount + first) * es; };
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  for (size_t j = 0; j < rounds; ++j, ++round_) {
    const size_t first = j * perRound;
    const size_t bytes = pieceOf(blockCount, first, perRound) * es;
    FW_RETURN_IF_ERROR(beginRound(node, kAlltoall, -1, blockCount, bytes * ranks_));
    char* area = input(localRank_);
    for (int q = 0; q < ranks_; ++q) {
      if (q != localRank_) segmentCopy(area + q * bytes, in + at(q, first), bytes);
    }
    arrive();
    if (!inPlace) resultCopy(out + at(localRank_, first), in + at(localRank_, first), bytes, streaming);
    for (int step = 1; step < ranks_; ++step) {
      const int q = (localRank_ + step) % ranks_;
      FW_RETURN_IF_ERROR(awaitArrival(q));
      resultCopy(out + at(q, first), input(q) + localRank_ * bytes, bytes, streaming);
    }
    post(finished(round_));
  }
  return Status::ok();
}

Status SharedMemoryNode::barrier(CollectiveContext& node) {
  FW_RETURN_IF_ERROR(enterCall(node));
  FW_RETURN_IF_ERROR(beginRound(node, kBarrier, -1, 0, 0));
  arrive();
  Status st = awaitAllArrivals();  // finished is implied (shm_node.h)
  ++round_;
  return st;
}

}  // namespace fairway
