// The node's shared-memory segment, as fairway-sim models it. The segment
// (providers/shm/) is not algorithm code over messages: ranks copy into
// and out of one shared mapping and reduce from it, synchronised by flags
// in it. The model charges each rank the bytes its part of that work
// moves (copies in, reductions of its slice, copies out) and stands in
// for the flags with the node's dissemination barrier over the simulated
// messages, so a two-phase or leader call whose node phase the selector
// puts on the segment runs with its rail phase unchanged.
#pragma once

#include "algorithms/node_phase.h"

namespace fairway::sim {

class SegmentNodePhase final : public NodePhase {
 public:
  bool readsStrided() const override { return true; }
  Status reduceScatter(CollectiveContext& node, const void* send, void* out, const ChunkLayout& blocks,
                       void* partial) override;
  Status allgather(CollectiveContext& node, void* buf, const ChunkLayout& blocks) override;
  Status reduce(CollectiveContext& node, const void* send, void* recv, size_t count, int root) override;
  Status broadcast(CollectiveContext& node, void* buf, size_t count, int root) override;
  Status allreduce(CollectiveContext& node, const void* send, void* recv, size_t count) override;
  Status barrier(CollectiveContext& node) override;
};

}  // namespace fairway::sim
