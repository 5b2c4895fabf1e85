// Ring allreduce: a ring reduce-scatter leaves each rank one reduced chunk
// in place in recv, then a ring allgather spreads the chunks. Each rank
// sends and receives 2(n-1)/n of the buffer, the minimum possible.
#include "algorithms/algorithms.h"

namespace fairway {

Status ringAllreduce(CollectiveContext& ctx, const void* send, void* recv, size_t count) {
  const ChunkLayout layout{count, ctx.size()};
  void* mine = ctx.at(recv, layout.chunkOffset(ctx.rank()));
  // recv doubles as the partial-sum buffer: every chunk of it is rewritten
  // by the allgather afterwards anyway.
  FW_RETURN_IF_ERROR(ringReduceScatter(ctx, send, mine, layout, recv));
  return ringAllgather(ctx, recv, layout);
}

}  // namespace fairway
