// Recursive-doubling allreduce: log2(p) rounds in which partners swap their
// whole buffers and both combine. Each rank moves log2(p) full buffers, more
// than the ring's 2(n-1)/n, but in the fewest dependent steps, which is what
// counts for small and medium buffers, above all when ranks share cores.
// Non-power-of-two counts fold the extra ranks in first, as Rabenseifner does.
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/registry.h"
#include "algorithms/power_of_two_fold.h"
#include "core/bytes.h"

namespace fairway {

Status recursiveDoublingAllreduce(CollectiveContext& ctx, const void* send, void* recv, size_t count) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const Reducer& reducer = ctx.reducer();
  FW_RETURN_IF_ERROR(ctx.copy(recv, send, count));
  if (n == 1 || count == 0) {
    FW_RETURN_IF_ERROR(ctx.finalize(reducer, recv, count));
    return Status::ok();
  }
  char* tmp = ctx.scratchBytes(count * ctx.elementSize());
  const PowerOfTwoFold fold(r, n, /*stepsPerRound=*/1);
  FW_RETURN_IF_ERROR(fold.fold(ctx, recv, count, tmp));
  const int p = fold.participants();
  const int vrank = fold.virtualRank();

  if (vrank >= 0) {
    uint32_t step = 1;
    for (int mask = 1; mask < p; mask *= 2, ++step) {
      int partner = fold.realRank(vrank ^ mask);
      FW_RETURN_IF_ERROR(ctx.sendRecv(partner, recv, count, partner, tmp, count, step));
      // Lower rank's data first, so both partners compute identical bits.
      if (vrank < (vrank ^ mask)) {
        FW_RETURN_IF_ERROR(ctx.combine(reducer, recv, recv, tmp, count));
      } else {
        FW_RETURN_IF_ERROR(ctx.combine(reducer, recv, tmp, recv, count));
      }
    }
    FW_RETURN_IF_ERROR(ctx.finalize(reducer, recv, count));
  }

  return fold.unfold(ctx, recv, count);
}

namespace {
Status runRecursiveDoubling(CollectiveContext& ctx, const CollectiveArgs& a) {
  return recursiveDoublingAllreduce(ctx, a.send, a.recv, a.count);
}
double recursiveDoublingCostUs(CollectiveKind, const CostTerms& t) { return t.logN * (t.flat.costUs(t.S) + t.step); }
}  // namespace

const AlgorithmRow kRecursiveDoublingRow = {"recursive_doubling", bitOf(CollectiveKind::AllReduce),
                                            runRecursiveDoubling, recursiveDoublingCostUs};

}  // namespace fairway
