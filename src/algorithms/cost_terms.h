// What an algorithm's cost formula (its registry row's `cost`) reads: the
// alpha-beta shape of the ranks (link_model.h) and the terms several
// formulas share. The inter-node link is one NIC; a node has `rails` of
// them, which its ranks share.
#pragma once

#include <cstddef>

#include "core/link_model.h"
#include "core/pipeline_settings.h"

namespace fairway {

struct ClusterShape {
  int ranks = 1;
  int nodes = 1;
  int perNode = 1;  // only meaningful when every node has the same count
  LinkModel intra = kDefaultIntraLink;
  LinkModel inter = kDefaultInterLink;
  double wireRatio = 1;  // compressed algorithms: bytes on the wire per input byte
  // NICs a node's inter-node traffic leaves through (its ranks' distinct
  // NICs, one per rail on a GPU node): where every rank of a node sends
  // at once (two-phase's rails, compressed flat), they share these.
  int rails = 1;
  // How the algorithms cut their messages (segments, slices): on links
  // whose latency outweighs a piece's transfer, the pieces' latencies add up.
  PipelineSettings pipeline;
  // The fixed cost of one copy or reduction call on the buffers' memory:
  // on a device each is a kernel launch (kDeviceStepUs), on the host a
  // function call the links' latencies dwarf (0). Two-phase on hundreds
  // of nodes makes thousands of them per slice (a reduction per received
  // shard, per node's ring step), which fairway-sim showed deciding the
  // crossovers at 4,096 GPUs (docs/simulator.md).
  double stepUs = 0;
  // Two-phase's node phase runs in NCCL (one kernel per call, its
  // reductions inside it), not in Fairway's ring, whose reducing steps
  // make one combine call per piece.
  bool nodePhaseInNccl = false;
};
// A CUDA kernel launch and its completion, the order the h100-ndr400
// preset of fairway-sim charges; not yet measured on a GPU by the project.
inline constexpr double kDeviceStepUs = 4;

// The shape's numbers as the formulas name them, for a call of `bytes`
// (the whole buffer for allreduce and reduce-scatter, one rank's block for
// allgather).
struct CostTerms {
  CostTerms(size_t bytes, const ClusterShape& shape);
  const ClusterShape& shape;
  size_t bytes;
  double n, M, D, S;                 // ranks, nodes, ranks per node, bytes
  double logN, logD, logM;           // rounded up
  const LinkModel& flat;             // what a flat algorithm crosses at every step
  const LinkModel& in;               // inside a node
  const LinkModel& out;              // between nodes
  double r;                          // wire bytes per input byte
  double R;                          // NICs a node's concurrent senders spread over
  double step, nodeStep, ncclCalls;  // copy/reduction call costs (see ClusterShape::stepUs)
  double extraRounds;                // a rail exchange's rounds past the first, in latencies
  double railRounds;                 // rounds of a rail exchange (RailExchange)

  // A chunk a ring step moves in segments of the pipeline's size.
  double segmentedUs(const LinkModel& link, double chunk) const;
  // The pieces a ring step cuts a chunk into.
  double piecesOf(double chunk) const;
  // A ring step that reduces every piece it receives before forwarding it.
  double reducingStepUs(const LinkModel& link, double chunk) const;
  // The reducing steps of `rings` node rings, one after another, over `bytes` in all.
  double nodeRingReducingUs(double rings, double bytes) const;
  // Compressed flat's one pass (reduce-scatter's whole, allreduce's half).
  double compressedFlatPassUs() const;
};

// Two-phase's phases over `slices` pipelined slices: each slice pays the
// phases' latencies, and a slice's node phase overlaps earlier slices'
// rail exchanges, so the longer phase dominates.
double overlappedUs(double nodeUs, double railUs, double slices);

}  // namespace fairway
