// Binomial-tree reduce, pipelined in segments: each rank combines its
// children's partial results into its own, segment by segment, and passes
// each finished segment to its parent. Combination order is fixed by the
// tree, so every run gives the same bits.
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/binomial_tree.h"
#include "core/bytes.h"

namespace fairway {

Status binomialReduce(CollectiveContext& ctx, const void* send, void* recv, size_t count, int root) {
  const BinomialTree tree(ctx.size(), ctx.rank(), root);
  const Reducer& reducer = ctx.reducer();
  const bool isRoot = tree.vrank == 0;
  if (ctx.size() == 1) {
    FW_RETURN_IF_ERROR(ctx.copy(recv, send, count));
    FW_RETURN_IF_ERROR(ctx.finalize(reducer, recv, count));
    return Status::ok();
  }
  if (count == 0) return Status::ok();
  const Segments seg = ctx.segments();
  const size_t segments = seg.countFor(count);
  const int children = tree.childCount();
  const size_t window = static_cast<size_t>(ctx.pipelineDepth());
  const size_t slotBytes = seg.segmentElems * ctx.elementSize();

  // Layout of scratch: per child, `window` receive slots; then, on inner
  // ranks, the running partial result (the root uses recv for it).
  const size_t slotsBytes = window * children * slotBytes;
  const bool needsPartial = !isRoot && children > 0;
  char* scratch = ctx.scratchBytes(slotsBytes + (needsPartial ? count * ctx.elementSize() : 0));
  char* partial = isRoot ? static_cast<char*>(recv) : (needsPartial ? scratch + slotsBytes : nullptr);
  auto slot = [&](int child, size_t j) { return scratch + ((j % window) * children + child) * slotBytes; };

  Pending* recvs = ctx.pendings(window * children + segments);
  Pending* sends = recvs + window * children;
  int childRanks[32];  // a binomial tree node has at most log2(n) <= 31 children
  int found = 0;
  tree.forEachChild([&](int child) { childRanks[found++] = child; });

  size_t posted = 0;
  auto postNext = [&]() -> Status {
    for (int c = 0; c < children; ++c) {
      FW_RETURN_IF_ERROR(ctx.recv(childRanks[c], slot(c, posted), seg.length(count, posted),
                                  static_cast<uint32_t>(posted), &recvs[(posted % window) * children + c]));
    }
    ++posted;
    return Status::ok();
  };
  while (posted < segments && posted < window) FW_RETURN_IF_ERROR(postNext());

  for (size_t j = 0; j < segments; ++j) {
    const size_t len = seg.length(count, j);
    const char* mine = ctx.at(send, seg.offset(j));
    const char* result = mine;
    for (int c = 0; c < children; ++c) {
      FW_RETURN_IF_ERROR(ctx.wait(&recvs[(j % window) * children + c]));
      char* dst = ctx.at(partial, seg.offset(j));
      FW_RETURN_IF_ERROR(ctx.combine(reducer, dst, result, slot(c, j), len));
      result = dst;
    }
    if (posted < segments) FW_RETURN_IF_ERROR(postNext());
    if (isRoot) {
      char* dst = ctx.at(recv, seg.offset(j));
      FW_RETURN_IF_ERROR(ctx.copy(dst, result, len));
      FW_RETURN_IF_ERROR(ctx.finalize(reducer, dst, len));
    } else {
      FW_RETURN_IF_ERROR(ctx.send(tree.parent(), result, len, static_cast<uint32_t>(j), &sends[j]));
    }
  }
  return ctx.waitAll(sends, segments);
}

}  // namespace fairway
