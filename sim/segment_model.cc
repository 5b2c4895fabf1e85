#include "sim/segment_model.h"

#include "algorithms/algorithms.h"
#include "algorithms/context.h"

namespace fairway::sim {
namespace {

// Addresses the model's copies name: the segment is never read.
char* segment(CollectiveContext& node) { return node.scratchBytes(0); }

// Everyone's input in, then each rank combines its slice of `count` from
// the node's D inputs.
Status inAndReduce(CollectiveContext& node, const void* send, size_t count) {
  const int D = node.size();
  FW_RETURN_IF_ERROR(node.copy(segment(node), send, count));
  FW_RETURN_IF_ERROR(disseminationBarrier(node));
  const ChunkLayout slices{count, D};
  const size_t mine = slices.chunkCount(node.rank());
  for (int p = 1; p < D; ++p) {
    FW_RETURN_IF_ERROR(node.combine(node.reducer(), segment(node), segment(node), segment(node), mine));
  }
  return disseminationBarrier(node);
}

}  // namespace

Status SegmentNodePhase::reduceScatter(CollectiveContext& node, const void* send, void*, const ChunkLayout& blocks,
                                       void*) {
  const int D = node.size();
  const size_t own = blocks.chunkCount(node.rank());
  FW_RETURN_IF_ERROR(node.copy(segment(node), send, blocks.count - own));
  FW_RETURN_IF_ERROR(disseminationBarrier(node));
  for (int p = 1; p < D; ++p) {
    FW_RETURN_IF_ERROR(node.combine(node.reducer(), segment(node), segment(node), segment(node), own));
  }
  return disseminationBarrier(node);
}

Status SegmentNodePhase::allgather(CollectiveContext& node, void* buf, const ChunkLayout& blocks) {
  const size_t own = blocks.chunkCount(node.rank());
  FW_RETURN_IF_ERROR(node.copy(segment(node), buf, own));
  FW_RETURN_IF_ERROR(disseminationBarrier(node));
  return node.copy(buf, segment(node), blocks.count - own);
}

Status SegmentNodePhase::allreduce(CollectiveContext& node, const void* send, void* recv, size_t count) {
  FW_RETURN_IF_ERROR(inAndReduce(node, send, count));
  return node.copy(recv, segment(node), count);
}

Status SegmentNodePhase::reduce(CollectiveContext& node, const void* send, void* recv, size_t count, int root) {
  FW_RETURN_IF_ERROR(inAndReduce(node, send, count));
  return node.rank() == root ? node.copy(recv, segment(node), count) : Status::ok();
}

Status SegmentNodePhase::broadcast(CollectiveContext& node, void* buf, size_t count, int root) {
  if (node.rank() == root) FW_RETURN_IF_ERROR(node.copy(segment(node), buf, count));
  FW_RETURN_IF_ERROR(disseminationBarrier(node));
  return node.rank() == root ? Status::ok() : node.copy(buf, segment(node), count);
}

Status SegmentNodePhase::barrier(CollectiveContext& node) { return disseminationBarrier(node); }

}  // namespace fairway::sim
