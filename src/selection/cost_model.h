// Alpha-beta cost model for choosing between flat and hierarchical
// algorithms (link_model.h). The inter-node link is one NIC; a node has
// `rails` of them, which its ranks share.
#pragma once

#include <cstddef>
#include <string>

#include "algorithms/algorithm.h"
#include "collective/collective_args.h"
#include "core/link_model.h"
#include "core/pipeline_settings.h"
#include "core/status.h"

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

// Predicted microseconds of algorithm for a collective of `bytes` (the
// whole buffer for allreduce and reduce-scatter, one rank's block for
// allgather), or a negative value when the model has no formula for it.
double predictMicros(CollectiveKind kind, Algorithm algorithm, size_t bytes, const ClusterShape& shape);

}  // namespace fairway
