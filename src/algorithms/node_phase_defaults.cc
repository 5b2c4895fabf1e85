// The point-to-point algorithms a NodePhase runs where its provider has
// no faster way of its own, and the ring node phase built from them.
#include "algorithms/node_phase.h"

#include "algorithms/algorithms.h"
#include "algorithms/context.h"

namespace fairway {

Status NodePhase::reduce(CollectiveContext& node, const void* send, void* recv, size_t count, int root) {
  return binomialReduce(node, send, recv, count, root);
}

Status NodePhase::broadcast(CollectiveContext& node, void* buf, size_t count, int root) {
  return binomialBroadcast(node, buf, count, root);
}

Status NodePhase::broadcastFrom(CollectiveContext& node, const void* send, void* recv, size_t count, int root) {
  if (node.rank() == root) FW_RETURN_IF_ERROR(node.copy(recv, send, count));
  return broadcast(node, recv, count, root);
}

Status NodePhase::allreduce(CollectiveContext& node, const void* send, void* recv, size_t count) {
  return ringAllreduce(node, send, recv, count);
}

Status NodePhase::allgatherFrom(CollectiveContext& node, const void* own, void* buf, const ChunkLayout& blocks) {
  const int r = node.rank();
  FW_RETURN_IF_ERROR(node.copy(node.at(buf, blocks.chunkOffset(r)), own, blocks.chunkCount(r)));
  return allgather(node, buf, blocks);
}

Status NodePhase::barrier(CollectiveContext& node) { return disseminationBarrier(node); }

Status NodePhase::alltoall(CollectiveContext& node, const void* send, void* recv, size_t blockCount) {
  return uniformPairwiseAlltoall(node, send, recv, blockCount);
}

Status NodePhase::allgatherInto(CollectiveContext&, const void*, const OutputBlocks&) {
  return Status(fwInternalError, "a list allgather reached a node provider that takes one buffer");
}

Status NodePhase::reduceScatterFrom(CollectiveContext&, const InputBlocks&, void*) {
  return Status(fwInternalError, "a list reduce-scatter reached a node provider that takes one buffer");
}

Status RingNodePhase::reduceScatter(CollectiveContext& node, const void* send, void* out, const ChunkLayout& blocks,
                                    void* partial) {
  return ringReduceScatter(node, send, out, blocks, partial);
}

Status RingNodePhase::allgather(CollectiveContext& node, void* buf, const ChunkLayout& blocks) {
  return ringAllgather(node, buf, blocks);
}

}  // namespace fairway
