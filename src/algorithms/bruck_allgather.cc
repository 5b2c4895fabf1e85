// Bruck's allgather: ceil(log2 n) steps, each doubling the blocks a rank
// holds, in a scratch buffer rotated so this rank's block comes first.
// Fewest messages, so it wins for small blocks.
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/registry.h"
#include "core/bytes.h"

namespace fairway {

Status bruckAllgather(CollectiveContext& ctx, const void* send, void* recv, size_t sendcount) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t blockBytes = sendcount * ctx.elementSize();
  char* rotated = ctx.scratchBytes(blockBytes * n);
  FW_RETURN_IF_ERROR(ctx.copy(rotated, send, sendcount));
  uint32_t step = 0;
  for (int have = 1; have < n; have *= 2, ++step) {
    int blocks = std::min(have, n - have);
    FW_RETURN_IF_ERROR(ctx.sendRecv(positiveMod(r - have, n), rotated, blocks * sendcount, (r + have) % n,
                                    rotated + have * blockBytes, blocks * sendcount, step));
  }
  // rotated[i] is rank (r + i)'s block: two contiguous copies put blocks
  // r..n-1 and 0..r-1 in place (on a device, two kernels, not n).
  char* out = static_cast<char*>(recv);
  const size_t tail = static_cast<size_t>(n - r);  // blocks of ranks r..n-1
  FW_RETURN_IF_ERROR(ctx.copy(out + r * blockBytes, rotated, tail * sendcount));
  if (r > 0) FW_RETURN_IF_ERROR(ctx.copy(out, rotated + tail * blockBytes, static_cast<size_t>(r) * sendcount));
  return Status::ok();
}

namespace {
Status runBruck(CollectiveContext& ctx, const CollectiveArgs& a) {
  return bruckAllgather(ctx, a.send, a.recv, a.count);
}
// Its own block copied first; received into rotated scratch, then put in
// place with two more copies.
double bruckCostUs(CollectiveKind, const CostTerms& t) {
  return t.logN * t.flat.alphaUs + (t.n - 1) * t.S / (t.flat.gbPerSec * 1e3) + 3 * t.step;
}
}  // namespace

const AlgorithmRow kBruckRow = {"bruck", bitOf(CollectiveKind::AllGather), runBruck, bruckCostUs};

}  // namespace fairway
