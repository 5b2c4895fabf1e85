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
// The intra-node phases are the context's node provider (the ring, or
// NCCL); when the rail works in other memory (device buffers staged
// through pinned host memory), block d's node sum is copied there after
// stage A, reduced and diffused there, and copied back before stage C.
#include <cstring>
#include <vector>

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
  // Slices alive at once; no more than there are (a buffer of few slices
  // on many nodes keeps no slots it cannot use, each 2(M-1) pendings).
  const int slots = std::min(2 * lag + 1, slices.n);
  const size_t maxBlock = ChunkLayout{slices.chunkCount(0), g.D}.chunkCount(0);
  const size_t maxShard = ChunkLayout{maxBlock, g.M}.chunkCount(0);
  NodePhase& nodePhase = ctx.nodePhase();
  DataSpace& railSpace = ctx.railSpace();
  const bool staged = ctx.railStaged();
  // Per slot: the node's sum of block d (data memory); the other nodes'
  // shards of it and, when staged, its copy (rail memory).
  char* sums = ctx.outerBytes(slots * maxBlock * es + 64);
  const size_t railSlot = (g.M * maxShard + (staged ? maxBlock : 0)) * es;
  char* railBase = ctx.railBytes(slots * railSlot + 64);
  auto nodeSum = [&](int s) { return sums + (s % slots) * maxBlock * es; };
  auto railIn = [&](int s) { return railBase + (s % slots) * railSlot; };
  auto railOwn = [&](int s) { return railIn(s) + g.M * maxShard * es; };  // staged only
  // Block d's node sum as the rail reads it.
  auto railSum = [&](int s) { return staged ? railOwn(s) : nodeSum(s); };
  // A slice's exchange and its diffuse share a slot's pendings: stage B
  // finishes the one before it starts the other, and stage C finishes the
  // diffuse before stage A starts the next exchange in the slot (2 lag + 1
  // slices later).
  const size_t perSlice = RailExchange::pendingsFor(g.M, p.railPeersInFlight);
  Pending* pendings = ctx.outerPendings(slots * perSlice + 1);
  std::vector<RailExchange> exchanges(slots);
  auto exchange = [&](int s) -> RailExchange& { return exchanges[s % slots]; };
  auto pendingsOf = [&](int s) { return pendings + (s % slots) * perSlice; };

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

  // Where shard j of block d is reduced and diffused: in recv, or in the
  // staged copy.
  auto shardAt = [&](const Geometry& geo, int s, int j) {
    return staged ? railOwn(s) + geo.shards.chunkOffset(j) * es : shardInRecv(geo, j);
  };

  auto stageA = [&](int s) -> Status {
    Geometry geo = geometry(s);
    FW_RETURN_IF_ERROR(nodePhase.reduceScatter(node, static_cast<const char*>(send) + geo.offset * es, nodeSum(s),
                                               geo.blocks, static_cast<char*>(recv) + geo.offset * es));
    if (staged) FW_RETURN_IF_ERROR(ctx.copy(railOwn(s), nodeSum(s), geo.blocks.chunkCount(g.d)));
    const char* sum = railSum(s);
    char* in = railIn(s);
    const ChunkLayout shards = geo.shards;
    const size_t mineLen = shards.chunkCount(g.m);
    return exchange(s).start(
        rail, static_cast<uint32_t>(2 * s), pendingsOf(s),
        [=](int j) -> const void* { return sum + shards.chunkOffset(j) * es; },
        [=](int j) { return shards.chunkCount(j); }, [=](int j) -> void* { return in + j * maxShard * es; },
        [=](int) { return mineLen; });
  };
  auto stageB = [&](int s) -> Status {
    Geometry geo = geometry(s);
    FW_RETURN_IF_ERROR(exchange(s).finish());
    const size_t len = geo.shards.chunkCount(g.m);
    char* mine = shardAt(geo, s, g.m);
    const char* own = railSum(s) + geo.shards.chunkOffset(g.m) * es;
    if (g.M == 1) FW_RETURN_IF_ERROR(ctx.copy(mine, own, len));  // scratch and recv: disjoint, or the same
    bool first = true;
    for (int j = 0; j < g.M; ++j) {
      if (j == g.m) continue;
      FW_RETURN_IF_ERROR(railSpace.combine(phase, mine, first ? own : mine, railIn(s) + j * maxShard * es, len));
      first = false;
    }
    FW_RETURN_IF_ERROR(railSpace.finalize(ctx.reducer(), mine, len));
    const ChunkLayout shards = geo.shards;
    return exchange(s).start(
        rail, static_cast<uint32_t>(2 * s + 1), pendingsOf(s), [=](int) -> const void* { return mine; },
        [=](int) { return len; }, [=](int j) -> void* { return shardAt(geo, s, j); },
        [=](int j) { return shards.chunkCount(j); });
  };
  auto stageC = [&](int s) -> Status {
    Geometry geo = geometry(s);
    FW_RETURN_IF_ERROR(exchange(s).finish());
    if (staged) FW_RETURN_IF_ERROR(ctx.copy(shardInRecv(geo, 0), railOwn(s), geo.blocks.chunkCount(g.d)));
    return nodePhase.allgather(node, static_cast<char*>(recv) + geo.offset * es, geo.blocks);
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
