// Rabenseifner's allreduce: recursive-halving reduce-scatter, then
// recursive-doubling allgather, over the largest power of two p <= n ranks.
// With n = p + rem, the first 2*rem ranks pair up first: each even one hands
// its data to its odd neighbour and sits out, and gets the result at the end.
// log2(p) steps each way, so it beats the ring when latency dominates.
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/registry.h"
#include "algorithms/power_of_two_fold.h"
#include "core/bytes.h"

namespace fairway {
Status rabenseifnerAllreduce(CollectiveContext& ctx, const void* send, void* recv, size_t count) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const Reducer& reducer = ctx.reducer();
  FW_RETURN_IF_ERROR(ctx.copy(recv, send, count));
  if (n == 1) {
    FW_RETURN_IF_ERROR(ctx.finalize(reducer, recv, count));
    return Status::ok();
  }
  char* tmp = ctx.scratchBytes(count * ctx.elementSize());
  const PowerOfTwoFold fold(r, n, /*stepsPerRound=*/2);
  FW_RETURN_IF_ERROR(fold.fold(ctx, recv, count, tmp));
  const int p = fold.participants();
  const int vrank = fold.virtualRank();
  auto realRank = [&fold](int v) { return fold.realRank(v); };
  uint32_t step = 1;

  if (vrank >= 0) {
    const ChunkLayout blocks{count, p};
    auto offsetOf = [&](int block) { return blocks.chunkOffset(block); };
    // Halving: keep the half of the block range the partner does not keep.
    int lo = 0, hi = p;
    for (int mask = p / 2; mask >= 1; mask /= 2, ++step) {
      int partner = vrank ^ mask;
      int mid = (lo + hi) / 2;
      bool keepLow = vrank < partner;
      int keepLo = keepLow ? lo : mid, keepHi = keepLow ? mid : hi;
      int giveLo = keepLow ? mid : lo, giveHi = keepLow ? hi : mid;
      size_t keepElems = offsetOf(keepHi) - offsetOf(keepLo);
      FW_RETURN_IF_ERROR(ctx.sendRecv(realRank(partner), ctx.at(recv, offsetOf(giveLo)),
                                      offsetOf(giveHi) - offsetOf(giveLo), realRank(partner), tmp, keepElems, step));
      FW_RETURN_IF_ERROR(ctx.combine(reducer, ctx.at(recv, offsetOf(keepLo)), ctx.at(recv, offsetOf(keepLo)), tmp, keepElems));
      lo = keepLo;
      hi = keepHi;
    }
    FW_RETURN_IF_ERROR(ctx.finalize(reducer, ctx.at(recv, offsetOf(lo)), offsetOf(hi) - offsetOf(lo)));
    // Doubling: swap what each side has until everyone has every block.
    for (int mask = 1; mask < p; mask *= 2, ++step) {
      int partner = vrank ^ mask;
      int width = hi - lo;
      int partnerLo = (vrank & mask) ? lo - width : lo + width;
      int partnerHi = partnerLo + width;
      FW_RETURN_IF_ERROR(ctx.sendRecv(realRank(partner), ctx.at(recv, offsetOf(lo)), offsetOf(hi) - offsetOf(lo),
                                      realRank(partner), ctx.at(recv, offsetOf(partnerLo)),
                                      offsetOf(partnerHi) - offsetOf(partnerLo), step));
      lo = std::min(lo, partnerLo);
      hi = std::max(hi, partnerHi);
    }
  }

  return fold.unfold(ctx, recv, count);
}

namespace {
Status runRabenseifner(CollectiveContext& ctx, const CollectiveArgs& a) {
  return rabenseifnerAllreduce(ctx, a.send, a.recv, a.count);
}
double rabenseifnerCostUs(CollectiveKind, const CostTerms& t) {
  return 2 * t.logN * t.flat.alphaUs + 2 * (t.n - 1) / t.n * t.flat.costUs(t.S) -
         2 * (t.n - 1) / t.n * t.flat.alphaUs + t.logN * t.step;
}
}  // namespace

const AlgorithmRow kRabenseifnerRow = {"rabenseifner", bitOf(CollectiveKind::AllReduce), runRabenseifner,
                                       rabenseifnerCostUs};

}  // namespace fairway
