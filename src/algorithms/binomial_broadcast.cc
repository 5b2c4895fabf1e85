// Binomial-tree broadcast, pipelined in segments: a rank forwards each
// segment to its children as soon as it arrives from its parent, so deep
// trees stream instead of waiting for whole buffers.
#include "algorithms/algorithms.h"
#include "algorithms/registry.h"
#include "algorithms/binomial_tree.h"

namespace fairway {

Status binomialBroadcast(CollectiveContext& ctx, void* buf, size_t count, int root) {
  const BinomialTree tree(ctx.size(), ctx.rank(), root);
  if (ctx.size() == 1 || count == 0) return Status::ok();
  const Segments seg = ctx.segments();
  const size_t segments = seg.countFor(count);
  const int children = tree.childCount();
  const bool isRoot = tree.vrank == 0;
  const int window = ctx.pipelineDepth();
  // One pending receive per window slot, one pending send per child per segment.
  Pending* recvs = ctx.pendings(window + segments * children);
  Pending* sends = recvs + window;

  size_t posted = 0;
  auto postNext = [&]() -> Status {
    Status st = ctx.recv(tree.parent(), ctx.at(buf, seg.offset(posted)), seg.length(count, posted),
                         static_cast<uint32_t>(posted), &recvs[posted % window]);
    ++posted;
    return st;
  };
  if (!isRoot) {
    while (posted < segments && posted < static_cast<size_t>(window)) FW_RETURN_IF_ERROR(postNext());
  }
  for (size_t j = 0; j < segments; ++j) {
    if (!isRoot) {
      FW_RETURN_IF_ERROR(ctx.wait(&recvs[j % window]));
      if (posted < segments) FW_RETURN_IF_ERROR(postNext());
    }
    int c = 0;
    Status st;
    tree.forEachChild([&](int child) {
      if (st.isOk()) {
        st = ctx.send(child, ctx.at(buf, seg.offset(j)), seg.length(count, j), static_cast<uint32_t>(j),
                      &sends[j * children + c]);
      }
      ++c;
    });
    FW_RETURN_IF_ERROR(st);
  }
  return ctx.waitAll(sends, segments * children);
}

// The binomial tree's row: broadcast and reduce (binomial_reduce.cc).
namespace {
Status runBinomial(CollectiveContext& ctx, const CollectiveArgs& a) {
  if (a.kind == CollectiveKind::Reduce) return binomialReduce(ctx, a.send, a.recv, a.count, a.root);
  if (ctx.rank() == a.root) FW_RETURN_IF_ERROR(ctx.copy(a.recv, a.send, a.count));
  return binomialBroadcast(ctx, a.recv, a.count, a.root);
}
double binomialCostUs(CollectiveKind, const CostTerms& t) { return t.logN * t.flat.costUs(t.S); }
}  // namespace

const AlgorithmRow kBinomialRow = {"binomial", bitOf(CollectiveKind::Broadcast) | bitOf(CollectiveKind::Reduce),
                                   runBinomial, binomialCostUs};

}  // namespace fairway
