#include "algorithms/two_phase.h"

#include <algorithm>

#include "algorithms/algorithms.h"

namespace fairway {

Status twoPhaseGroups(const RankLayout& layout, int rank, TwoPhaseGroups* out) {
  if (!layout.uniform()) {
    return Status(fwInvalidUsage, "two-phase needs the same number of ranks on every node, not " + layout.describe());
  }
  TwoPhaseGroups g;
  g.layout = &layout;
  g.m = layout.nodeOf(rank);
  g.d = layout.localRankOf(rank);
  g.M = layout.nodeCount();
  g.D = layout.localSizeOf(rank);
  g.node = layout.ranksOfNode(g.m);
  g.rail = layout.rail(g.d);
  g.nodesConsecutive = true;
  for (int m = 0; m < g.M; ++m) {
    const std::vector<int>& ranks = layout.ranksOfNode(m);
    for (int d = 1; d < g.D; ++d) g.nodesConsecutive = g.nodesConsecutive && ranks[d] == ranks[0] + d;
  }
  *out = g;
  return Status::ok();
}

size_t sliceCount(const PipelineSettings& p, size_t wholeBytes, size_t elements, size_t shardsPerElementRow,
                  size_t elementSize) {
  if (elements == 0) return 1;
  const size_t bySize = (wholeBytes + p.sliceBytes - 1) / std::max<size_t>(1, p.sliceBytes);
  // Two pipelines' worth at least: with fewer slices than are in flight the
  // first slice's intra-node phase and the last one's reduction are a large
  // part of the time (4 MiB reduce-scatter on 2 nodes x 4: 8 slices 0.41-0.42
  // GB/s busbw, 4 slices 0.34-0.42).
  const size_t depth = 2 * static_cast<size_t>(std::max(1, p.slicesInFlight));
  // A shard is elements / slices / shardsPerElementRow elements.
  const size_t shardBytes = elements * elementSize / std::max<size_t>(1, shardsPerElementRow);
  const size_t mostByShardFloor = std::max<size_t>(1, shardBytes / std::max<size_t>(1, p.minShardBytes));
  return std::min({std::max(bySize, depth), mostByShardFloor, elements});
}

}  // namespace fairway
