// Two-phase allgather: the network first, while the data is smallest.
//  A. rail exchange: rank (m, d) sends its block to local rank d of every
//     other node and receives theirs, so it holds rail d's M blocks;
//  B. intra-node ring allgather of those D groups of M blocks, then each
//     block is copied to its owner's place in the result (owners need not
//     be contiguous by node).
// Slices of the block pipeline as in the other two-phase algorithms: the
// exchange of later slices crosses the network while a slice's stage B runs.
// The intra-node allgather is the context's node provider (the ring, or
// NCCL); when the rail works in other memory (device buffers staged
// through pinned host memory), this rank's slice is copied there before
// the exchange and the rail's M slices are copied back after it.
#include <cstring>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/two_phase.h"
#include "core/bytes.h"

namespace fairway {

Status twoPhaseAllgather(CollectiveContext& ctx, const void* send, void* recv, size_t count) {
  TwoPhaseSetup t(ctx, /*reduces=*/false);
  FW_RETURN_IF_ERROR(t.status);
  const TwoPhaseGroups& g = t.groups;
  const size_t es = t.elementSize;
  const int n = t.ranks;
  CollectiveContext& node = t.node;
  CollectiveContext& rail = t.rail;

  const PipelineSettings& p = ctx.pipeline();
  const ChunkLayout slices{count, static_cast<int>(sliceCount(p, count * n * es, count, 1, es))};
  // Slices in flight, no more than there are.
  const int slots = std::min(std::max(1, p.slicesInFlight), slices.n);
  const size_t maxLen = slices.chunkCount(0);
  NodePhase& nodePhase = ctx.nodePhase();
  const bool staged = ctx.railStaged();
  // Per slot, the slice of every rank's block, ordered (local rank, node);
  // when staged, the rail's M slices in rail memory too.
  char* base = ctx.outerBytes(slots * n * maxLen * es + 64);
  auto gathered = [&](int s) { return base + (s % slots) * n * maxLen * es; };
  char* railBase = staged ? ctx.railBytes(slots * g.M * maxLen * es + 64) : nullptr;
  const size_t perSlice = RailExchange::pendingsFor(g.M, p.railPeersInFlight);
  Pending* pendings = ctx.outerPendings(slots * perSlice + 1);
  std::vector<RailExchange> exchanges(slots);

  auto stageA = [&](int s) -> Status {
    const size_t len = slices.chunkCount(s);
    char* railBlocks = staged ? railBase + (s % slots) * g.M * maxLen * es
                              : gathered(s) + static_cast<size_t>(g.d) * g.M * len * es;
    const char* mine = static_cast<const char*>(send) + slices.chunkOffset(s) * es;
    FW_RETURN_IF_ERROR(ctx.copy(railBlocks + g.m * len * es, mine, len));
    if (staged) mine = railBlocks + g.m * len * es;
    return exchanges[s % slots].start(
        rail, static_cast<uint32_t>(s), pendings + (s % slots) * perSlice, [=](int) -> const void* { return mine; },
        [=](int) { return len; }, [=](int j) -> void* { return railBlocks + j * len * es; }, [=](int) { return len; });
  };
  auto stageB = [&](int s) -> Status {
    const size_t len = slices.chunkCount(s);
    FW_RETURN_IF_ERROR(exchanges[s % slots].finish());
    if (staged) {
      FW_RETURN_IF_ERROR(ctx.copy(gathered(s) + static_cast<size_t>(g.d) * g.M * len * es,
                                  railBase + (s % slots) * g.M * maxLen * es, g.M * len));
    }
    FW_RETURN_IF_ERROR(nodePhase.allgather(node, gathered(s), equalChunks(g.M * len, g.D)));
    for (int d = 0; d < g.D; ++d) {
      for (int m = 0; m < g.M; ++m) {
        FW_RETURN_IF_ERROR(
            ctx.copy(static_cast<char*>(recv) + (static_cast<size_t>(g.rankAt(m, d)) * count + slices.chunkOffset(s)) * es,
                     gathered(s) + (static_cast<size_t>(d) * g.M + m) * len * es, len));
      }
    }
    return Status::ok();
  };

  const int total = slices.n;
  const int lag = slots - 1;
  for (int i = 0; i < total + lag; ++i) {
    if (i < total) FW_RETURN_IF_ERROR(stageA(i));
    if (i - lag >= 0) FW_RETURN_IF_ERROR(stageB(i - lag));
  }
  return Status::ok();
}

}  // namespace fairway
