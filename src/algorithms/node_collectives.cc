// The shared-memory row ("shm"): the whole call on the node's provider
// (providers/shm/), over a communicator of one node whose segment can
// carry the call's data.
#include "algorithms/chunk_layout.h"
#include "algorithms/node_phase.h"
#include "algorithms/registry.h"

namespace fairway {
namespace {

Status runOnNode(CollectiveContext& ctx, const CollectiveArgs& a) {
  NodePhase& node = ctx.nodePhase();
  switch (a.kind) {
    case CollectiveKind::AllReduce: return node.allreduce(ctx, a.send, a.recv, a.count);
    case CollectiveKind::ReduceScatter:
      return node.reduceScatter(ctx, a.send, a.recv, equalChunks(a.count, ctx.size()), nullptr);
    case CollectiveKind::AllGather: return node.allgatherFrom(ctx, a.send, a.recv, equalChunks(a.count, ctx.size()));
    case CollectiveKind::Broadcast: return node.broadcastFrom(ctx, a.send, a.recv, a.count, a.root);
    case CollectiveKind::Reduce: return node.reduce(ctx, a.send, a.recv, a.count, a.root);
    // In place too: the provider stages the outgoing blocks where it must.
    case CollectiveKind::AllToAll: return node.alltoall(ctx, a.send, a.recv, a.count);
    default: return node.barrier(ctx);
  }
}

const char* whyNodeCannotRun(const SelectionKey& key, const SelectionConditions& conditions) {
  if (key.layout == nullptr) return "it runs on whole communicators only";
  if (key.layout->nodeCount() > 1) return "the ranks span several nodes (two-phase and leaders use it inside each node)";
  if (!conditions.sharedMemory) return "this node has no shared-memory segment (see the INFO log of communicator creation)";
  if (!conditions.segmentServes(key)) return "the segment carries host buffers only";
  return nullptr;
}

}  // namespace

// No cost formula: the default table prefers it on one node wherever it can run.
const AlgorithmRow kSharedMemoryRow = {
    "shm",
    bitOf(CollectiveKind::AllReduce) | bitOf(CollectiveKind::ReduceScatter) | bitOf(CollectiveKind::AllGather) |
        bitOf(CollectiveKind::Broadcast) | bitOf(CollectiveKind::Reduce) | bitOf(CollectiveKind::AllToAll) |
        bitOf(CollectiveKind::Barrier),
    runOnNode,
    nullptr,
    whyNodeCannotRun,
    Placement::WholeCallOnNode};

}  // namespace fairway
