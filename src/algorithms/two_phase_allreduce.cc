// Two-phase allreduce: the two-phase reduce-scatter, then its mirror image.
// Each slice of the buffer is cut into D blocks (one per local rank), and
// block d into M shards (one per node), so nothing needs packing:
//  A. intra-node ring reduce-scatter of the D blocks; then the rail
//     exchange of block d's shards is posted;
//  B. the exchange is waited for and reduced: rank (m, d) holds shard m of
//     block d, complete; it is posted back to the rest of the rail (diffuse);
//  C. the diffuse is waited for: block d is complete; intra-node ring
//     allgather of the D blocks.
// Stage B of slice s runs slicesInFlight - 1 slices after its stage A, and
// stage C as many again, so while a slice's intra-node phases run, earlier
// slices' exchanges cross the network. Inter-node bytes per rank are
// 2(M-1)/(M*D) of the buffer, where a flat ring moves 2(N-1)/N.
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/two_phase.h"
#include "core/bytes.h"

namespace fairway {

Status twoPhaseAllreduce(CollectiveContext& ctx, const void* send, void* recv, size_t count) {
  TwoPhaseSetup t(ctx, /*reduces=*/true);
  FW_RETURN_IF_ERROR(t.status);
  const TwoPhaseGroups& g = t.groups;
  const size_t es = t.elementSize;
  const int n = t.ranks;
  const Reducer& phase = t.phase;
  CollectiveContext& node = t.node;
  CollectiveContext& rail = t.rail;

  const PipelineSettings& p = ctx.pipeline();
  const ChunkLayout slices{count, static_cast<int>(sliceCount(p, count * es, count, n, es))};
  const int lag = std::max(1, p.slicesInFlight) - 1;  // stage distance
  const int slots = 2 * lag + 1;                      // slices alive at once
  const size_t maxBlock = ChunkLayout{slices.chunkCount(0), g.D}.chunkCount(0);
  const size_t maxShard = ChunkLayout{maxBlock, g.M}.chunkCount(0);
  char* base = ctx.outerBytes(slots * (maxBlock + g.M * maxShard) * es + 64);
  auto nodeSum = [&](int s) { return base + (s % slots) * (maxBlock + g.M * maxShard) * es; };
  auto railIn = [&](int s) { return nodeSum(s) + maxBlock * es; };
  const size_t perSlice = 2 * (g.M - 1);
  Pending* exchanges = ctx.outerPendings(2 * slots * perSlice + 1);
  Pending* diffuses = exchanges + slots * perSlice;

  // Where slice s, its blocks and this rank's block's shards lie.
  struct Geometry {
    size_t offset;       // slice start in the buffer
    ChunkLayout blocks;  // D blocks of the slice
    ChunkLayout shards;  // M shards of block d
    size_t blockOffset;  // block d's start within the slice
  };
  auto geometry = [&](int s) {
    Geometry geo;
    geo.offset = slices.chunkOffset(s);
    geo.blocks = ChunkLayout{slices.chunkCount(s), g.D};
    geo.shards = ChunkLayout{geo.blocks.chunkCount(g.d), g.M};
    geo.blockOffset = geo.blocks.chunkOffset(g.d);
    return geo;
  };
  auto shardInRecv = [&](const Geometry& geo, int j) {
    return static_cast<char*>(recv) + (geo.offset + geo.blockOffset + geo.shards.chunkOffset(j)) * es;
  };

  auto stageA = [&](int s) -> Status {
    Geometry geo = geometry(s);
    FW_RETURN_IF_ERROR(ringReduceScatter(node, static_cast<const char*>(send) + geo.offset * es, nodeSum(s),
                                         geo.blocks, static_cast<char*>(recv) + geo.offset * es));
    return postRailExchange(
        rail, static_cast<uint32_t>(2 * s), exchanges + (s % slots) * perSlice,
        [&](int j) { return nodeSum(s) + geo.shards.chunkOffset(j) * es; },
        [&](int j) { return geo.shards.chunkCount(j); },
        [&](int j) { return railIn(s) + j * maxShard * es; }, [&](int) { return geo.shards.chunkCount(g.m); });
  };
  auto stageB = [&](int s) -> Status {
    Geometry geo = geometry(s);
    FW_RETURN_IF_ERROR(ctx.waitAll(exchanges + (s % slots) * perSlice, perSlice));
    const size_t len = geo.shards.chunkCount(g.m);
    char* mine = shardInRecv(geo, g.m);
    const char* own = nodeSum(s) + geo.shards.chunkOffset(g.m) * es;
    if (g.M == 1) FW_RETURN_IF_ERROR(ctx.copy(mine, own, len));  // scratch and recv: disjoint
    bool first = true;
    for (int j = 0; j < g.M; ++j) {
      if (j == g.m) continue;
      FW_RETURN_IF_ERROR(ctx.combine(phase, mine, first ? own : mine, railIn(s) + j * maxShard * es, len));
      first = false;
    }
    FW_RETURN_IF_ERROR(ctx.finalize(ctx.reducer(), mine, len));
    return postRailExchange(
        rail, static_cast<uint32_t>(2 * s + 1), diffuses + (s % slots) * perSlice, [&](int) { return mine; },
        [&](int) { return len; }, [&](int j) { return shardInRecv(geo, j); },
        [&](int j) { return geo.shards.chunkCount(j); });
  };
  auto stageC = [&](int s) -> Status {
    Geometry geo = geometry(s);
    FW_RETURN_IF_ERROR(ctx.waitAll(diffuses + (s % slots) * perSlice, perSlice));
    return ringAllgather(node, static_cast<char*>(recv) + geo.offset * es, geo.blocks);
  };

  const int total = slices.n;
  for (int i = 0; i < total + 2 * lag; ++i) {
    if (i < total) FW_RETURN_IF_ERROR(stageA(i));
    if (i - lag >= 0 && i - lag < total) FW_RETURN_IF_ERROR(stageB(i - lag));
    if (i - 2 * lag >= 0 && i - 2 * lag < total) FW_RETURN_IF_ERROR(stageC(i - 2 * lag));
  }
  return Status::ok();
}

}  // namespace fairway
