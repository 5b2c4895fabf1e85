// Two-phase reduce-scatter. With D ranks on each of M nodes, rank (m, d)
// must end with chunk r of everyone's input, r being its own rank:
//  1. intra-node reduce-scatter (ring, shared memory): local rank d ends
//     with its node's sum of rail d's M chunks. When every node's ranks are
//     consecutive, that is M ring reduce-scatters, one per node m', each
//     over node m''s D chunks, read in place at a stride; otherwise the
//     chunks are first packed by (local rank, node) of their owners and one
//     ring runs over the packed slice;
//  2. exchange along the rail: chunk m' goes to the rank of rail d on node
//     m', which adds the M - 1 chunks it receives to its own: done.
// Inter-node bytes per rank: (M-1)/M of its rail's share, in one network
// hop, every local rank on its own rail (so on its own NIC).
//
// The buffer is cut into slices along the chunk; slice s's exchange crosses
// the network while slice s+1's intra-node phase runs (slicesInFlight
// slices in the pipeline at most). The intra-node phase is the context's
// node provider (rings, or NCCL, which reads packed blocks); when the rail
// works in other memory (device buffers staged through pinned host
// memory), the node's sums are copied there before the exchange and the
// finished chunk is copied back.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/two_phase.h"
#include "core/bytes.h"

namespace fairway {

Status twoPhaseReduceScatter(CollectiveContext& ctx, const void* send, void* recv, size_t count) {
  TwoPhaseSetup t(ctx, /*reduces=*/true);
  FW_RETURN_IF_ERROR(t.status);
  const TwoPhaseGroups& g = t.groups;
  const size_t es = t.elementSize;
  const int n = t.ranks;
  const Reducer& phase = t.phase;
  CollectiveContext& node = t.node;
  CollectiveContext& rail = t.rail;

  const PipelineSettings& p = ctx.pipeline();
  // With consecutive nodes the intra-node phase runs M rings whose messages
  // are one rank's piece of the slice, where allreduce's and allgather's
  // (and the packed ring's) are M pieces. Slices M times larger give those
  // messages the same size, which keeps them at or above UCX's rendezvous
  // threshold: zero-copy (CMA) instead of copy-in/copy-out through shared
  // memory, a quarter less CPU per byte on 2 nodes x 4.
  NodePhase& nodePhase = ctx.nodePhase();
  DataSpace& railSpace = ctx.railSpace();
  const bool staged = ctx.railStaged();
  const bool strided = g.nodesConsecutive && nodePhase.readsStrided();
  const size_t sliceWholeBytes = count * (strided ? g.D : n) * es;
  const ChunkLayout slices{count, static_cast<int>(sliceCount(p, sliceWholeBytes, count, 1, es))};
  const size_t maxLen = slices.chunkCount(0);
  // Slices in flight, no more than there are.
  const int slots = std::min(std::max(1, p.slicesInFlight), slices.n);
  // Outer memory (data): per slot the node's sums, then the ring's partial
  // sums: a packed slice, or one node's blocks. Rail memory: per slot the
  // other nodes' contributions and, when staged, a copy of the node's sums.
  const size_t partialElems = strided ? (g.D - 1) * count + maxLen : n * maxLen;
  char* sums = ctx.outerBytes((slots * g.M * maxLen + partialElems) * es + 64);
  char* packed = sums + slots * g.M * maxLen * es;
  auto nodeSum = [&](size_t s) { return sums + (s % slots) * g.M * maxLen * es; };
  const size_t railSlot = (staged ? 2 : 1) * g.M * maxLen * es;
  char* railBase = ctx.railBytes(slots * railSlot + 64);
  auto railIn = [&](size_t s) { return railBase + (s % slots) * railSlot; };
  // The node's sums as the rail reads them.
  auto railSum = [&](size_t s) { return staged ? railIn(s) + g.M * maxLen * es : nodeSum(s); };
  const size_t perSlice = RailExchange::pendingsFor(g.M, p.railPeersInFlight);
  Pending* pendings = ctx.outerPendings(slots * perSlice + 1);
  std::vector<RailExchange> exchanges(slots);

  auto finish = [&](size_t s) -> Status {
    const size_t len = slices.chunkCount(static_cast<int>(s));
    FW_RETURN_IF_ERROR(exchanges[s % slots].finish());
    char* out = static_cast<char*>(recv) + slices.chunkOffset(static_cast<int>(s)) * es;
    const char* own = railSum(s) + g.m * len * es;
    // Reduced in rail memory: into recv itself, or into the staged copy.
    char* sum = staged ? railSum(s) + g.m * len * es : out;
    if (g.M == 1) {
      FW_RETURN_IF_ERROR(ctx.copy(sum, own, len));  // scratch and recv: disjoint, or the same
    } else {
      bool first = true;
      for (int j = 0; j < g.M; ++j) {
        if (j == g.m) continue;
        FW_RETURN_IF_ERROR(railSpace.combine(phase, sum, first ? own : sum, railIn(s) + j * len * es, len));
        first = false;
      }
    }
    FW_RETURN_IF_ERROR(railSpace.finalize(ctx.reducer(), sum, len));
    return staged ? ctx.copy(out, sum, len) : Status::ok();
  };

  const size_t total = static_cast<size_t>(slices.n);
  for (size_t s = 0; s < total; ++s) {
    if (s >= static_cast<size_t>(slots)) FW_RETURN_IF_ERROR(finish(s - slots));
    const size_t len = slices.chunkCount(static_cast<int>(s));
    const size_t from = slices.chunkOffset(static_cast<int>(s));
    if (strided) {
      for (int m = 0; m < g.M; ++m) {
        const char* blocks = static_cast<const char*>(send) + (static_cast<size_t>(g.rankAt(m, 0)) * count + from) * es;
        FW_RETURN_IF_ERROR(nodePhase.reduceScatter(node, blocks, nodeSum(s) + m * len * es,
                                                   stridedChunks(len, g.D, count), packed));
      }
    } else {
      for (int d = 0; d < g.D; ++d) {
        for (int m = 0; m < g.M; ++m) {
          FW_RETURN_IF_ERROR(
              ctx.copy(packed + (static_cast<size_t>(d) * g.M + m) * len * es,
                       static_cast<const char*>(send) + (static_cast<size_t>(g.rankAt(m, d)) * count + from) * es, len));
        }
      }
      FW_RETURN_IF_ERROR(nodePhase.reduceScatter(node, packed, nodeSum(s), equalChunks(g.M * len, g.D), packed));
    }
    if (staged) FW_RETURN_IF_ERROR(ctx.copy(railSum(s), nodeSum(s), g.M * len));
    const char* sums = railSum(s);
    char* in = railIn(s);
    FW_RETURN_IF_ERROR(exchanges[s % slots].start(
        rail, static_cast<uint32_t>(s), pendings + (s % slots) * perSlice,
        [=](int j) -> const void* { return sums + j * len * es; }, [=](int) { return len; },
        [=](int j) -> void* { return in + j * len * es; }, [=](int) { return len; }));
  }
  for (size_t s = total > static_cast<size_t>(slots) ? total - slots : 0; s < total; ++s) FW_RETURN_IF_ERROR(finish(s));
  return Status::ok();
}

}  // namespace fairway
