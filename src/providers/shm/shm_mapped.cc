// The shared-memory provider's collectives for buffers every rank of the
// node allocated with fwHostMemAlloc (mappable_memory.h): each rank sees
// its peers' buffers as its own memory, so it writes what they need
// straight into their outputs with plain (streaming) stores, reading each
// input byte once. An allgather then reads each block once and writes it
// to every output; an allreduce reads slice r of every input once on rank
// r and writes the sum into every output: the bytes docs/performance.md's
// memory bound counts, where pulling a peer's block reads it a second
// time and the segment's rounds copy every byte twice. Where this rank
// could not map a peer's buffer after all (its mapping refused), it
// reaches it through the kernel's copy instead, in the same rounds.
#include <algorithm>

#include "providers/shm/shm_copy.h"
#include "providers/shm/shm_node.h"

namespace fairway {

// Every rank publishes its output's base and, once all have arrived,
// writes its block into each output at its place (the layout is every
// rank's), a piece at a time so that the piece it reads from own stays
// in the cache for the other destinations. Its own output may hold own
// partly (the caller's overlap): that block goes first, whole.
Status SharedMemoryNode::allgatherMapped(CollectiveContext& node, const void* own, const OutputBlocks& out) {
  const size_t es = node.elementSize();
  const ChunkLayout& blocks = out.layout();
  char* ownInOut = out.at(localRank_, 0);
  const size_t ownBytes = blocks.chunkCount(localRank_) * es;
  const bool copyFirst = own != ownInOut && overlaps(own, ownInOut, ownBytes);
  if (copyFirst) FW_RETURN_IF_ERROR(node.copy(ownInOut, own, blocks.chunkCount(localRank_)));
  const char* block = copyFirst ? ownInOut : static_cast<const char*>(own);
  const bool streaming = streams(blocks.count * es);
  FW_RETURN_IF_ERROR(beginRound(node, kAllgatherMapped, -1, blocks.count, 0));
  publishResult(round_ % 2, out.at(0, 0));
  arrive();
  FW_RETURN_IF_ERROR(awaitAllArrivals());
  for (int p = 0; p < ranks_; ++p) peerBlocks_[p] = p == localRank_ ? 0 : peerResult(p, round_ % 2);
  const uint64_t place = blocks.chunkOffset(localRank_) * es;
  for (size_t at = 0; at < ownBytes; at += kReducePieceBytes) {
    const size_t length = std::min(kReducePieceBytes, ownBytes - at);
    for (int step = 1; step < ranks_; ++step) {
      const int q = (localRank_ + step) % ranks_;  // not all ranks into one output at once
      FW_RETURN_IF_ERROR(peers_.write(q, peerBlocks_[q] + place + at, block + at, length, true));
    }
    if (block != ownInOut) resultCopy(ownInOut + at, block + at, length, streaming);
  }
  post(finished(round_));
  const Status st = awaitAll(finished(round_));  // every peer's block is in this rank's output
  ++round_;
  return st;
}

// Rank r reduces slice r of every input, where it lies, piece by piece in
// the cache, and writes each piece of the sum into every output. In place
// (send == recv) a rank's slice r is overwritten only by rank r, after it
// has read that piece of every input; nobody else reads slice r.
Status SharedMemoryNode::allreduceMapped(CollectiveContext& node, const void* send, void* recv, size_t count) {
  const size_t es = node.elementSize();
  const ChunkLayout slices{count, ranks_, 0};
  const size_t ownAt = slices.chunkOffset(localRank_) * es;
  const size_t ownBytes = slices.chunkCount(localRank_) * es;
  const bool streaming = streams(count * es);
  FW_RETURN_IF_ERROR(beginRound(node, kAllreduceMapped, -1, count, 0));
  publishBuffer(round_ % 2, send);
  publishResult(round_ % 2, recv);
  arrive();
  FW_RETURN_IF_ERROR(awaitAllArrivals());
  std::vector<uint64_t>& results = landedResults_;
  results.assign(static_cast<size_t>(ranks_), 0);
  for (int p = 0; p < ranks_; ++p) {
    if (p == localRank_) continue;
    peerBlocks_[p] = peerBuffer(p, round_ % 2);
    results[p] = peerResult(p, round_ % 2);
  }
  const size_t piece = std::max<size_t>(kReducePieceBytes / es, 1) * es;
  char* bounce = node.stagingBytes(piece * static_cast<size_t>(ranks_ + 1));
  char* combined = bounce + static_cast<size_t>(ranks_) * piece;
  const char* mine = static_cast<const char*>(send) + ownAt;
  char* ownOut = static_cast<char*>(recv) + ownAt;
  for (size_t at = 0; at < ownBytes; at += piece) {
    const size_t length = std::min(piece, ownBytes - at);
    for (int p = 0; p < ranks_; ++p) {
      views_[p] = p == localRank_ ? mine + at : peers_.viewOf(p, peerBlocks_[p] + ownAt + at, length);
      if (views_[p] == nullptr) {
        char* staged = bounce + static_cast<size_t>(p) * piece;
        FW_RETURN_IF_ERROR(peers_.read(p, staged, peerBlocks_[p] + ownAt + at, length));
        views_[p] = staged;
      }
    }
    combineInRankOrder(node, ranks_, combined, length / es, [&](int p) { return views_[p]; });
    node.reducer().finalize(combined, length / es);
    for (int step = 1; step < ranks_; ++step) {
      const int q = (localRank_ + step) % ranks_;
      FW_RETURN_IF_ERROR(peers_.write(q, results[q] + ownAt + at, combined, length, true));
    }
    resultCopy(ownOut + at, combined, length, streaming);
  }
  post(finished(round_));
  const Status st = awaitAll(finished(round_));  // every peer's slice is in this rank's output
  ++round_;
  return st;
}

}  // namespace fairway
