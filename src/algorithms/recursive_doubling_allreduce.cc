// Recursive-doubling allreduce: log2(p) rounds in which partners swap their
// whole buffers and both combine. Each rank moves log2(p) full buffers, more
// than the ring's 2(n-1)/n, but in the fewest dependent steps, which is what
// counts for small and medium buffers, above all when ranks share cores.
// Non-power-of-two counts fold the extra ranks in first, as Rabenseifner does.
#include <cstring>

#include "algorithms/algorithms.h"

namespace fairway {

Status recursiveDoublingAllreduce(CollectiveContext& ctx, const void* send, void* recv, size_t count) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const Reducer& reducer = ctx.reducer();
  if (send != recv) std::memcpy(recv, send, count * ctx.elementSize());
  if (n == 1 || count == 0) {
    reducer.finalize(recv, count);
    return Status::ok();
  }
  int p = 1;
  int rounds = 0;
  while (p * 2 <= n) { p *= 2; ++rounds; }
  const int rem = n - p;
  char* tmp = static_cast<char*>(ctx.scratch().bytes(count * ctx.elementSize()));
  // Steps fixed by position: 0 fold, 1..rounds exchanges, rounds+1 unfold.
  const uint32_t foldStep = 0, unfoldStep = static_cast<uint32_t>(rounds + 1);
  Pending* pending = ctx.scratch().pendings(2);

  int vrank;
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      FW_RETURN_IF_ERROR(ctx.send(r + 1, recv, count, foldStep, pending));
      FW_RETURN_IF_ERROR(ctx.wait(pending));
      vrank = -1;
    } else {
      FW_RETURN_IF_ERROR(ctx.recv(r - 1, tmp, count, foldStep, pending));
      FW_RETURN_IF_ERROR(ctx.wait(pending));
      reducer.combine(recv, recv, tmp, count);
      vrank = r / 2;
    }
  } else {
    vrank = r - rem;
  }
  auto realRank = [rem](int v) { return v < rem ? 2 * v + 1 : v + rem; };

  if (vrank >= 0) {
    uint32_t step = 1;
    for (int mask = 1; mask < p; mask *= 2, ++step) {
      int partner = realRank(vrank ^ mask);
      FW_RETURN_IF_ERROR(ctx.recv(partner, tmp, count, step, &pending[0]));
      FW_RETURN_IF_ERROR(ctx.send(partner, recv, count, step, &pending[1]));
      FW_RETURN_IF_ERROR(ctx.waitAll(pending, 2));
      // Lower rank's data first, so both partners compute identical bits.
      if (vrank < (vrank ^ mask)) {
        reducer.combine(recv, recv, tmp, count);
      } else {
        reducer.combine(recv, tmp, recv, count);
      }
    }
    reducer.finalize(recv, count);
  }

  if (r < 2 * rem) {
    if (r % 2 == 0) {
      FW_RETURN_IF_ERROR(ctx.recv(r + 1, recv, count, unfoldStep, pending));
    } else {
      FW_RETURN_IF_ERROR(ctx.send(r - 1, recv, count, unfoldStep, pending));
    }
    FW_RETURN_IF_ERROR(ctx.wait(pending));
  }
  return Status::ok();
}

}  // namespace fairway
