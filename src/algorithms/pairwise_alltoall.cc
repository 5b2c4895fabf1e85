// Pairwise-exchange all-to-all: at step s rank r sends to r+s and receives
// from r-s, so every step is a perfect matching and no rank is swamped.
// A window of steps is kept in flight to hide latency.
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/registry.h"
#include "core/bytes.h"

namespace fairway {

Status pairwiseAlltoall(CollectiveContext& ctx, const void* send, const BlockMap& sendBlocks, void* recv,
                        const BlockMap& recvBlocks) {
  const int n = ctx.size();
  const int r = ctx.rank();
  FW_RETURN_IF_ERROR(ctx.copy(ctx.at(recv, recvBlocks.displ(r)), ctx.at(send, sendBlocks.displ(r)), sendBlocks.count(r)));
  const int window = ctx.pipelineDepth();
  Pending* p = ctx.pendings(2 * window);
  for (int s = 1; s < n; ++s) {
    int to = (r + s) % n;
    int from = positiveMod(r - s, n);
    Pending* slot = &p[2 * ((s - 1) % window)];
    FW_RETURN_IF_ERROR(ctx.waitAll(slot, 2));
    FW_RETURN_IF_ERROR(ctx.recv(from, ctx.at(recv, recvBlocks.displ(from)), recvBlocks.count(from), 0, &slot[0]));
    FW_RETURN_IF_ERROR(ctx.send(to, ctx.at(send, sendBlocks.displ(to)), sendBlocks.count(to), 0, &slot[1]));
  }
  return ctx.waitAll(p, 2 * window);
}

Status stageInPlaceAlltoall(CollectiveContext& ctx, const void** send, const void* recv, size_t count) {
  if (*send != recv) return Status::ok();
  const size_t n = static_cast<size_t>(ctx.size());
  void* staged = ctx.stagingBytes(count * n * ctx.elementSize());
  FW_RETURN_IF_ERROR(ctx.copy(staged, *send, count * n));
  *send = staged;
  return Status::ok();
}

Status uniformPairwiseAlltoall(CollectiveContext& ctx, const void* send, void* recv, size_t count) {
  FW_RETURN_IF_ERROR(stageInPlaceAlltoall(ctx, &send, recv, count));
  BlockMap blocks;
  blocks.uniform = count;
  return pairwiseAlltoall(ctx, send, blocks, recv, blocks);
}

namespace {
Status runPairwise(CollectiveContext& ctx, const CollectiveArgs& a) {
  if (a.kind == CollectiveKind::AllToAll) return uniformPairwiseAlltoall(ctx, a.send, a.recv, a.count);
  return pairwiseAlltoall(ctx, a.send, BlockMap{a.sendcounts, a.sdispls, 0}, a.recv,
                          BlockMap{a.recvcounts, a.rdispls, 0});
}
}  // namespace

// No cost formula: the only algorithm of its collectives besides the segment.
const AlgorithmRow kPairwiseRow = {"pairwise", bitOf(CollectiveKind::AllToAll) | bitOf(CollectiveKind::AllToAllv),
                                   runPairwise, nullptr};

}  // namespace fairway
