#include "algorithms/dispatch.h"

#include "algorithms/algorithms.h"
#include "algorithms/registry.h"
#include "core/bytes.h"

namespace fairway {

namespace {

// Whether a list form's blocks go to the node provider as they lie.
bool blocksInPlace(CollectiveContext& ctx, const AlgorithmRow& row) {
  return row.placement == Placement::WholeCallOnNode && ctx.nodePhase().takesBlockLists();
}

// The list form of allgather: block by block on a node provider that
// takes lists; otherwise the chosen algorithm gathers into one buffer in
// staging (no plain allgather uses staging, and compression has no list
// form) and the blocks are copied out of it.
Status allgatherIntoList(CollectiveContext& ctx, const CollectiveArgs& a, const AlgorithmRow& row) {
  const ChunkLayout layout = equalChunks(a.count, ctx.size());
  if (blocksInPlace(ctx, row)) {
    return ctx.nodePhase().allgatherInto(ctx, a.send, OutputBlocks(a.recvBlocks.data(), layout, ctx.elementSize()));
  }
  char* packed = ctx.stagingBytes(layout.count * ctx.elementSize());
  FW_RETURN_IF_ERROR(row.run(ctx, makeArgs(CollectiveKind::AllGather, a.send, packed, a.count, a.datatype)));
  for (int q = 0; q < ctx.size(); ++q) {
    FW_RETURN_IF_ERROR(ctx.copy(a.recvBlocks[q], ctx.at(packed, layout.chunkOffset(q)), a.count));
  }
  return Status::ok();
}

// The list form of reduce-scatter: block by block on a node provider that
// takes lists; otherwise the blocks are packed into staging and reduced
// there, by two-phase where it was chosen, else by the ring, which keeps
// its partial sums in that copy (staging holds no room for another; the
// caller's blocks stay as they were).
Status reduceScatterFromList(CollectiveContext& ctx, const CollectiveArgs& a, Algorithm algorithm,
                             const AlgorithmRow& row) {
  const ChunkLayout layout = equalChunks(a.count, ctx.size());
  if (blocksInPlace(ctx, row)) {
    return ctx.nodePhase().reduceScatterFrom(ctx, InputBlocks(a.sendBlocks.data(), layout, ctx.elementSize()),
                                             a.recv);
  }
  char* packed = ctx.stagingBytes(layout.count * ctx.elementSize());
  for (int q = 0; q < ctx.size(); ++q) {
    FW_RETURN_IF_ERROR(ctx.copy(ctx.at(packed, layout.chunkOffset(q)), a.sendBlocks[q], a.count));
  }
  if (algorithm == Algorithm::TwoPhase) return twoPhaseReduceScatter(ctx, packed, a.recv, a.count);
  return ringReduceScatter(ctx, packed, a.recv, layout, packed);
}

}  // namespace

Status runCollective(CollectiveContext& ctx, const CollectiveArgs& a, Algorithm algorithm) {
  const AlgorithmRow* row = rowOf(algorithm);
  if (row == nullptr) {
    return Status(fwInternalError, "algorithm id " + std::to_string(static_cast<int>(algorithm)) + " has no row");
  }
  if (row->run == nullptr) {
    return Status(fwInternalError, std::string(row->name) + " is its provider's own collective; it reached the engine");
  }
  if ((row->collectives & bitOf(a.kind)) == 0) {
    return Status(fwInternalError, std::string(row->name) + " does not run " + collectiveName(a.kind));
  }
  // A compressed allgather runs the chosen plain algorithm over its wire format.
  const bool compressedReduction = a.compression.active() && a.kind != CollectiveKind::AllGather;
  if (compressedReduction != row->compressed) {
    return Status(fwInternalError, std::string(compressedReduction ? "a compressed call reached the plain algorithm "
                                                                   : "a plain call reached the compressed algorithm ") +
                                       row->name);
  }
  if (a.kind == CollectiveKind::AllGather) {
    if (a.listForm()) return allgatherIntoList(ctx, a, *row);
    if (a.compression.active()) {
      return compressedAllgather(ctx, a.send, a.recv, a.count, a.datatype, a.compression, row->run);
    }
  }
  if (a.kind == CollectiveKind::ReduceScatter && a.listForm()) return reduceScatterFromList(ctx, a, algorithm, *row);
  return row->run(ctx, a);
}

}  // namespace fairway
