// Every algorithm, written once against CollectiveContext. Each returns
// finished results: with fwAvg, the division is already applied.
#pragma once

#include "algorithms/context.h"
#include "collective/collective_args.h"
#include "core/compression.h"

namespace fairway {

// Reduces the n chunks of send (layout.n == ctx.size()) so this rank ends
// with chunk ctx.rank() in out. out may be send's own chunk (in place).
// partial, laid out like send, holds the other chunks' partial sums (it may
// be the allreduce's recv buffer, or send itself when in place).
Status ringReduceScatter(CollectiveContext& ctx, const void* send, void* out, const ChunkLayout& layout,
                         void* partial);
// buf holds this rank's chunk at its offset; fills in every other chunk.
Status ringAllgather(CollectiveContext& ctx, void* buf, const ChunkLayout& layout);
// Ring reduce-scatter then ring allgather: bandwidth-optimal for large buffers.
Status ringAllreduce(CollectiveContext& ctx, const void* send, void* recv, size_t count);
// Recursive halving then doubling: fewer steps for small and medium buffers.
Status rabenseifnerAllreduce(CollectiveContext& ctx, const void* send, void* recv, size_t count);
// Partners swap whole buffers: fewest dependent steps, for small buffers.
Status recursiveDoublingAllreduce(CollectiveContext& ctx, const void* send, void* recv, size_t count);
// log2(n) steps: best for small per-rank blocks.
Status bruckAllgather(CollectiveContext& ctx, const void* send, void* recv, size_t sendcount);
// buf is the source on root and the destination elsewhere.
Status binomialBroadcast(CollectiveContext& ctx, void* buf, size_t count, int root);
// recv is written on root only.
Status binomialReduce(CollectiveContext& ctx, const void* send, void* recv, size_t count, int root);

// Two-phase (fairring) algorithms over a uniform multi-node layout
// (ctx.layout()): intra-node phases over shared memory, inter-node phases
// along rails, pipelined in slices (two_phase_*.cc).
Status twoPhaseReduceScatter(CollectiveContext& ctx, const void* send, void* recv, size_t count);
Status twoPhaseAllreduce(CollectiveContext& ctx, const void* send, void* recv, size_t count);
Status twoPhaseAllgather(CollectiveContext& ctx, const void* send, void* recv, size_t count);

// Through node leaders (local rank 0 of each node): binomial trees inside
// nodes, the network crossed by leaders only (leader_collectives.cc). Any
// layout of ctx.layout().
Status leaderAllreduce(CollectiveContext& ctx, const void* send, void* recv, size_t count);
Status leaderBroadcast(CollectiveContext& ctx, void* buf, size_t count, int root);
Status leaderReduce(CollectiveContext& ctx, const void* send, void* recv, size_t count, int root);

// Compressed collectives (compressed_collectives.cc): each element is
// quantized once per level, summed in float32 by its owner. Flat: every
// rank on its own; hierarchical: full precision inside ctx.layout()'s
// (uniform) nodes, compressed along the rails. Host buffers.
Status compressedReduceScatter(CollectiveContext& ctx, const void* send, void* recv, size_t count,
                               const Compression& compression, bool hierarchical);
Status compressedAllreduce(CollectiveContext& ctx, const void* send, void* recv, size_t count,
                           const Compression& compression, bool hierarchical);
// Every rank's block encoded once, the wire bytes gathered by `plain` (a
// plain algorithm's run, given an allgather over the wire format whose
// send block already lies at its place in recv), every block decoded by all.
using PlainAllgather = Status (*)(CollectiveContext& wire, const CollectiveArgs& args);
Status compressedAllgather(CollectiveContext& ctx, const void* send, void* recv, size_t count, fwDataType_t type,
                           const Compression& compression, PlainAllgather plain);

// Where rank i's block sits: counts/displs arrays, or uniform blocks.
struct BlockMap {
  const size_t* counts = nullptr;
  const size_t* displs = nullptr;
  size_t uniform = 0;
  size_t count(int i) const { return counts ? counts[i] : uniform; }
  size_t displ(int i) const { return displs ? displs[i] : uniform * static_cast<size_t>(i); }
};
// send and recv must not overlap (the caller stages an in-place alltoall).
Status pairwiseAlltoall(CollectiveContext& ctx, const void* send, const BlockMap& sendBlocks, void* recv,
                        const BlockMap& recvBlocks);
// Blocks of `count` each way; in place (send == recv) the outgoing blocks
// are staged first, so the incoming ones cannot overwrite them.
Status uniformPairwiseAlltoall(CollectiveContext& ctx, const void* send, void* recv, size_t count);
// An in-place all-to-all's outgoing blocks (count each) copied to the
// context's staging area, *send pointed there; otherwise nothing.
Status stageInPlaceAlltoall(CollectiveContext& ctx, const void** send, const void* recv, size_t count);
// recv (n * count) is written on root only.
Status linearGather(CollectiveContext& ctx, const void* send, void* recv, size_t count, int root);
// send (n * count) is read on root only.
Status linearScatter(CollectiveContext& ctx, const void* send, void* recv, size_t count, int root);
// Every rank returns only after every rank has entered.
Status disseminationBarrier(CollectiveContext& ctx);

}  // namespace fairway
