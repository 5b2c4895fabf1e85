#include "algorithms/dispatch.h"

#include <cstring>

#include "algorithms/algorithms.h"
#include "core/bytes.h"
#include "core/datatype.h"
#include "core/log.h"

namespace fairway {

namespace {
// The ring allgather with the allgather call's arguments: send is this
// rank's block, already at its place in recv or copied there.
Status ringAllgatherInPlace(CollectiveContext& ctx, const void* send, void* recv, size_t count) {
  FW_RETURN_IF_ERROR(ctx.copy(ctx.at(recv, count * ctx.rank()), send, count));
  return ringAllgather(ctx, recv, equalChunks(count, ctx.size()));
}
// The same on the node's provider (a single-node communicator's segment).
Status nodeAllgatherInPlace(CollectiveContext& ctx, const void* send, void* recv, size_t count) {
  return ctx.nodePhase().allgatherFrom(ctx, send, recv, equalChunks(count, ctx.size()));
}

// Whether a list form's blocks go to the node provider as they lie.
bool blocksInPlace(CollectiveContext& ctx, Algorithm algo) {
  return algo == Algorithm::SharedMemory && ctx.nodePhase().takesBlockLists();
}

// The list form of allgather: block by block on a node provider that
// takes lists; otherwise the chosen algorithm gathers into one buffer in
// staging (no plain allgather uses staging, and compression has no list
// form) and the blocks are copied out of it.
Status allgatherIntoList(CollectiveContext& ctx, const CollectiveArgs& a, Algorithm algo) {
  const ChunkLayout layout = equalChunks(a.count, ctx.size());
  if (blocksInPlace(ctx, algo)) {
    return ctx.nodePhase().allgatherInto(ctx, a.send, OutputBlocks(a.recvBlocks.data(), layout, ctx.elementSize()));
  }
  char* packed = ctx.stagingBytes(layout.count * ctx.elementSize());
  FW_RETURN_IF_ERROR(runCollective(ctx, makeArgs(CollectiveKind::AllGather, a.send, packed, a.count, a.datatype), algo));
  for (int q = 0; q < ctx.size(); ++q) {
    FW_RETURN_IF_ERROR(ctx.copy(a.recvBlocks[q], ctx.at(packed, layout.chunkOffset(q)), a.count));
  }
  return Status::ok();
}

// The list form of reduce-scatter: block by block on a node provider that
// takes lists; otherwise the blocks are packed into staging, and the ring
// keeps its partial sums in that copy (the caller's blocks stay as they
// were).
Status reduceScatterFromList(CollectiveContext& ctx, const CollectiveArgs& a, Algorithm algo) {
  const ChunkLayout layout = equalChunks(a.count, ctx.size());
  if (blocksInPlace(ctx, algo)) {
    return ctx.nodePhase().reduceScatterFrom(ctx, InputBlocks(a.sendBlocks.data(), layout, ctx.elementSize()),
                                             a.recv);
  }
  char* packed = ctx.stagingBytes(layout.count * ctx.elementSize());
  for (int q = 0; q < ctx.size(); ++q) {
    FW_RETURN_IF_ERROR(ctx.copy(ctx.at(packed, layout.chunkOffset(q)), a.sendBlocks[q], a.count));
  }
  if (algo == Algorithm::TwoPhase) return twoPhaseReduceScatter(ctx, packed, a.recv, a.count);
  return ringReduceScatter(ctx, packed, a.recv, layout, packed);
}
}  // namespace

Status runCollective(CollectiveContext& ctx, const CollectiveArgs& a, Algorithm algo) {
  if (algo == Algorithm::Native) return Status(fwInternalError, "NCCL's own collective reached the host engine");
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t es = ctx.elementSize();
  const bool hierarchical = algo == Algorithm::CompressedTwoPhase;
  if (a.compression.active() && a.kind != CollectiveKind::AllGather && !isCompressedAlgorithm(algo)) {
    return Status(fwInternalError, std::string("a compressed call reached the plain algorithm ") + algorithmName(algo));
  }
  switch (a.kind) {
    case CollectiveKind::AllReduce: {
      switch (algo) {
        case Algorithm::CompressedFlat:
        case Algorithm::CompressedTwoPhase:
          return compressedAllreduce(ctx, a.send, a.recv, a.count, a.compression, hierarchical);
        case Algorithm::Ring: return ringAllreduce(ctx, a.send, a.recv, a.count);
        case Algorithm::RecursiveDoubling: return recursiveDoublingAllreduce(ctx, a.send, a.recv, a.count);
        case Algorithm::TwoPhase: return twoPhaseAllreduce(ctx, a.send, a.recv, a.count);
        case Algorithm::Leaders: return leaderAllreduce(ctx, a.send, a.recv, a.count);
        case Algorithm::SharedMemory: return ctx.nodePhase().allreduce(ctx, a.send, a.recv, a.count);
        default: return rabenseifnerAllreduce(ctx, a.send, a.recv, a.count);
      }
    }
    case CollectiveKind::ReduceScatter: {
      if (a.listForm()) return reduceScatterFromList(ctx, a, algo);
      if (isCompressedAlgorithm(algo)) {
        return compressedReduceScatter(ctx, a.send, a.recv, a.count, a.compression, hierarchical);
      }
      if (algo == Algorithm::TwoPhase) {
        return twoPhaseReduceScatter(ctx, a.send, a.recv, a.count);
      }
      if (algo == Algorithm::SharedMemory) {
        return ctx.nodePhase().reduceScatter(ctx, a.send, a.recv, equalChunks(a.count, n), nullptr);
      }
      // Partial sums need a buffer laid out like send; send is the caller's
      // and keeps its contents (beyond recv's chunk when in place).
      void* partial = ctx.stagingBytes(a.count * n * es);
      return ringReduceScatter(ctx, a.send, a.recv, equalChunks(a.count, n), partial);
    }
    case CollectiveKind::AllGather: {
      if (a.listForm()) return allgatherIntoList(ctx, a, algo);
      if (a.compression.active()) {
        // The plain algorithm chosen for the wire size, over the wire format.
        PlainAllgather plain = algo == Algorithm::TwoPhase       ? twoPhaseAllgather
                               : algo == Algorithm::Bruck        ? bruckAllgather
                               : algo == Algorithm::SharedMemory ? nodeAllgatherInPlace
                                                                 : ringAllgatherInPlace;
        return compressedAllgather(ctx, a.send, a.recv, a.count, a.datatype, a.compression, plain);
      }
      if (algo == Algorithm::TwoPhase) return twoPhaseAllgather(ctx, a.send, a.recv, a.count);
      if (algo == Algorithm::Bruck) return bruckAllgather(ctx, a.send, a.recv, a.count);
      if (algo == Algorithm::SharedMemory) return nodeAllgatherInPlace(ctx, a.send, a.recv, a.count);
      return ringAllgatherInPlace(ctx, a.send, a.recv, a.count);
    }
    case CollectiveKind::Broadcast:
      if (algo == Algorithm::SharedMemory) return ctx.nodePhase().broadcastFrom(ctx, a.send, a.recv, a.count, a.root);
      if (r == a.root) FW_RETURN_IF_ERROR(ctx.copy(a.recv, a.send, a.count));
      if (algo == Algorithm::Leaders) {
        return leaderBroadcast(ctx, a.recv, a.count, a.root);
      }
      return binomialBroadcast(ctx, a.recv, a.count, a.root);
    case CollectiveKind::Reduce:
      if (algo == Algorithm::Leaders) {
        return leaderReduce(ctx, a.send, a.recv, a.count, a.root);
      }
      if (algo == Algorithm::SharedMemory) return ctx.nodePhase().reduce(ctx, a.send, a.recv, a.count, a.root);
      return binomialReduce(ctx, a.send, a.recv, a.count, a.root);
    case CollectiveKind::AllToAll:
      // In place too: the node's provider stages the outgoing blocks where it must.
      if (algo == Algorithm::SharedMemory) return ctx.nodePhase().alltoall(ctx, a.send, a.recv, a.count);
      return uniformPairwiseAlltoall(ctx, a.send, a.recv, a.count);
    case CollectiveKind::AllToAllv:
      return pairwiseAlltoall(ctx, a.send, BlockMap{a.sendcounts, a.sdispls, 0}, a.recv,
                              BlockMap{a.recvcounts, a.rdispls, 0});
    case CollectiveKind::Gather:
      return linearGather(ctx, a.send, a.recv, a.count, a.root);
    case CollectiveKind::Scatter:
      return linearScatter(ctx, a.send, a.recv, a.count, a.root);
    case CollectiveKind::Barrier:
      if (algo == Algorithm::SharedMemory) return ctx.nodePhase().barrier(ctx);
      return disseminationBarrier(ctx);
  }
  return Status(fwInternalError, "unknown collective");
}

}  // namespace fairway
