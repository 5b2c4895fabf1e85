#include "algorithms/two_phase.h"

#include <algorithm>

#include "algorithms/algorithms.h"
#include "algorithms/registry.h"

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

const char* whyTwoPhaseLayoutRefuses(const SelectionKey& key) {
  const RankLayout* layout = key.layout;
  if (layout == nullptr) return "it runs on whole communicators only";
  if (layout->nodeCount() == 1) return "all ranks are on one node";
  if (!layout->uniform()) return "the nodes hold different numbers of ranks";
  return nullptr;
}

// The two-phase row: reduce-scatter, allreduce and allgather
// (two_phase_*.cc) over a uniform multi-node layout.
namespace {
Status runTwoPhase(CollectiveContext& ctx, const CollectiveArgs& a) {
  switch (a.kind) {
    case CollectiveKind::AllReduce: return twoPhaseAllreduce(ctx, a.send, a.recv, a.count);
    case CollectiveKind::ReduceScatter: return twoPhaseReduceScatter(ctx, a.send, a.recv, a.count);
    default: return twoPhaseAllgather(ctx, a.send, a.recv, a.count);
  }
}

double twoPhaseCostUs(CollectiveKind kind, const CostTerms& t) {
  const PipelineSettings& p = t.shape.pipeline;
  const size_t bytes = t.bytes;
  const double D = t.D, M = t.M, S = t.S, R = t.R;
  switch (kind) {
    case CollectiveKind::AllReduce: {
      // Intra reduce-scatter + allgather of D blocks; exchange and diffuse
      // of (M-1)/M of the buffer per node, over its R NICs; every slice
      // pays its steps' latencies, and a reduction per received shard.
      const double slices = static_cast<double>(sliceCount(p, bytes, bytes, t.shape.ranks, 1));
      return overlappedUs(t.nodeRingReducingUs(slices, S) +
                              (D - 1) * (slices * t.in.alphaUs + S / D / (t.in.gbPerSec * 1e3)) +
                              2 * slices * t.ncclCalls,
                          2 * (slices * std::max(1.0, t.railRounds) * t.out.alphaUs +
                               (M - 1) / M * S / R / (t.out.gbPerSec * 1e3)),
                          slices) +
             slices * (M - 1) * t.step;
    }
    case CollectiveKind::ReduceScatter: {
      // M strided node rings per slice (the whole buffer over M), one after
      // another, then a reduction per received shard.
      const double slices = static_cast<double>(sliceCount(p, bytes / t.shape.nodes, bytes / t.shape.ranks, 1, 1));
      return t.nodeRingReducingUs(slices * M, S) + slices * t.ncclCalls + t.out.costUs((M - 1) / M * S / R) +
             t.extraRounds + slices * M * t.step;
    }
    default: {  // allgather: a copy per rank's block into place, per slice
      const double slices = static_cast<double>(sliceCount(p, bytes * t.shape.ranks, bytes, 1, 1));
      return t.out.costUs((M - 1) * D * S / R) + t.extraRounds + (D - 1) * t.in.costUs(M * S) +
             slices * t.n * t.step;
    }
  }
}

const char* whyTwoPhaseCannotRun(const SelectionKey& key, const SelectionConditions&) {
  return whyTwoPhaseLayoutRefuses(key);
}
}  // namespace

const AlgorithmRow kTwoPhaseRow = {
    "twophase",
    bitOf(CollectiveKind::AllReduce) | bitOf(CollectiveKind::ReduceScatter) | bitOf(CollectiveKind::AllGather),
    runTwoPhase,
    twoPhaseCostUs,
    whyTwoPhaseCannotRun,
    Placement::NodeThenRails,
    /*ncclNodePhase=*/true};

}  // namespace fairway
