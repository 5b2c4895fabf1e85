// Gather and scatter straight between the root and every rank: the root
// keeps all n-1 transfers in flight at once; the network does the rest.
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/registry.h"
#include "core/bytes.h"

namespace fairway {

Status linearGather(CollectiveContext& ctx, const void* send, void* recv, size_t count, int root) {
  const int n = ctx.size();
  const int r = ctx.rank();
  if (r != root) {
    Pending* p = ctx.pendings(1);
    FW_RETURN_IF_ERROR(ctx.send(root, send, count, 0, p));
    return ctx.wait(p);
  }
  void* mine = ctx.at(recv, count * r);
  FW_RETURN_IF_ERROR(ctx.copy(mine, send, count));
  Pending* p = ctx.pendings(n);
  for (int i = 0; i < n; ++i) {
    if (i != r) FW_RETURN_IF_ERROR(ctx.recv(i, ctx.at(recv, count * i), count, 0, &p[i]));
  }
  return ctx.waitAll(p, n);
}

Status linearScatter(CollectiveContext& ctx, const void* send, void* recv, size_t count, int root) {
  const int n = ctx.size();
  const int r = ctx.rank();
  if (r != root) {
    Pending* p = ctx.pendings(1);
    FW_RETURN_IF_ERROR(ctx.recv(root, recv, count, 0, p));
    return ctx.wait(p);
  }
  const void* mine = ctx.at(send, count * r);
  FW_RETURN_IF_ERROR(ctx.copy(recv, mine, count));
  Pending* p = ctx.pendings(n);
  for (int i = 0; i < n; ++i) {
    if (i != r) FW_RETURN_IF_ERROR(ctx.send(i, ctx.at(send, count * i), count, 0, &p[i]));
  }
  return ctx.waitAll(p, n);
}

namespace {
Status runLinear(CollectiveContext& ctx, const CollectiveArgs& a) {
  if (a.kind == CollectiveKind::Gather) return linearGather(ctx, a.send, a.recv, a.count, a.root);
  return linearScatter(ctx, a.send, a.recv, a.count, a.root);
}
}  // namespace

const AlgorithmRow kLinearRow = {"linear", bitOf(CollectiveKind::Gather) | bitOf(CollectiveKind::Scatter), runLinear,
                                 nullptr};

}  // namespace fairway
