// Ring allreduce: a ring reduce-scatter leaves each rank one reduced chunk
// in place in recv, then a ring allgather spreads the chunks. Each rank
// sends and receives 2(n-1)/n of the buffer, the minimum possible.
#include "algorithms/algorithms.h"
#include "algorithms/registry.h"

namespace fairway {

Status ringAllreduce(CollectiveContext& ctx, const void* send, void* recv, size_t count) {
  const ChunkLayout layout{count, ctx.size()};
  void* mine = ctx.at(recv, layout.chunkOffset(ctx.rank()));
  // recv doubles as the partial-sum buffer: every chunk of it is rewritten
  // by the allgather afterwards anyway.
  FW_RETURN_IF_ERROR(ringReduceScatter(ctx, send, mine, layout, recv));
  return ringAllgather(ctx, recv, layout);
}

// The ring's row: allreduce, reduce-scatter and allgather, each rank
// passing chunks to the next; bandwidth-optimal for large buffers.
namespace {
Status runRing(CollectiveContext& ctx, const CollectiveArgs& a) {
  const int n = ctx.size();
  switch (a.kind) {
    case CollectiveKind::AllReduce: return ringAllreduce(ctx, a.send, a.recv, a.count);
    case CollectiveKind::ReduceScatter: {
      // Partial sums need a buffer laid out like send; send is the caller's
      // and keeps its contents (beyond recv's chunk when in place).
      void* partial = ctx.stagingBytes(a.count * n * ctx.elementSize());
      return ringReduceScatter(ctx, a.send, a.recv, equalChunks(a.count, n), partial);
    }
    default:  // allgather: this rank's block to its place, then the others'
      FW_RETURN_IF_ERROR(ctx.copy(ctx.at(a.recv, a.count * ctx.rank()), a.send, a.count));
      return ringAllgather(ctx, a.recv, equalChunks(a.count, n));
  }
}

double ringCostUs(CollectiveKind kind, const CostTerms& t) {
  switch (kind) {
    case CollectiveKind::AllReduce:
      return (t.n - 1) * (t.reducingStepUs(t.flat, t.S / t.n) + t.segmentedUs(t.flat, t.S / t.n));
    case CollectiveKind::ReduceScatter: return (t.n - 1) * t.reducingStepUs(t.flat, t.S / t.n);
    // Its own block copied first, then n - 1 blocks received.
    default: return (t.n - 1) * t.segmentedUs(t.flat, t.S) + t.step;
  }
}
}  // namespace

const AlgorithmRow kRingRow = {
    "ring",
    bitOf(CollectiveKind::AllReduce) | bitOf(CollectiveKind::ReduceScatter) | bitOf(CollectiveKind::AllGather),
    runRing, ringCostUs};

}  // namespace fairway
