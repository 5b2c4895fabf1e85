// Dissemination barrier: in round k each rank signals r + 2^k and waits for
// r - 2^k; after ceil(log2 n) rounds every rank has heard, transitively,
// from every other.
#include "algorithms/algorithms.h"
#include "algorithms/registry.h"

namespace fairway {

Status disseminationBarrier(CollectiveContext& ctx) {
  const int n = ctx.size();
  const int r = ctx.rank();
  char token = 0;
  char incoming = 0;
  uint32_t round = 0;
  for (int distance = 1; distance < n; distance *= 2, ++round) {
    FW_RETURN_IF_ERROR(ctx.sendRecv((r + distance) % n, &token, 1, positiveMod(r - distance, n), &incoming, 1, round));
  }
  return Status::ok();
}

namespace {
Status runDissemination(CollectiveContext& ctx, const CollectiveArgs&) { return disseminationBarrier(ctx); }
}  // namespace

const AlgorithmRow kDisseminationRow = {"dissemination", bitOf(CollectiveKind::Barrier), runDissemination, nullptr};

}  // namespace fairway
