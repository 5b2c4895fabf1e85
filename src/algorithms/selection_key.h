// What selection takes and gives: a call's key (collective, memory,
// layout, size), the device routes its communicator has, and the plan it
// gets (the algorithm, the provider of each phase, the pipeline settings).
#pragma once

#include <cstddef>

#include "algorithms/algorithm.h"
#include "collective/collective_args.h"
#include "core/pipeline_settings.h"
#include "core/provider.h"
#include "topo/rank_layout.h"
#include "topo/transport_plan.h"

namespace fairway {

// What may carry device buffers on a communicator, from its transport plan.
struct DeviceRoutes {
  bool present = false;         // this communicator has device buffers at all
  bool ncclEverywhere = false;  // NCCL reaches every rank (one node, or NCCL at both levels)
  bool ncclInNodes = false;     // NCCL inside each node, UCX between nodes
  bool ucxDirect = false;       // UCX reaches device memory; otherwise it is staged
  Provider ucx() const { return ucxDirect ? Provider::DeviceUcx : Provider::StagedUcx; }
  // A communicator's routes, from its transport plan.
  static DeviceRoutes of(const TransportPlan& plan);
};

struct SelectionKey;
// What a call runs on besides its key: the communicator's device routes
// and its node's segment.
struct SelectionConditions {
  DeviceRoutes routes;
  bool sharedMemory = false;  // this rank's node has its shared-memory segment
  // Whether the segment can carry the call's data: host buffers only (the
  // CPU copies into and out of it; device buffers stay on the device, their
  // messages staged through pinned bounce buffers where UCX cannot reach them).
  inline bool segmentServes(const SelectionKey& key) const;
};

struct SelectionKey {
  CollectiveKind kind = CollectiveKind::Barrier;
  bool onDevice = false;
  // The whole buffer (allreduce, reduce-scatter, broadcast, reduce) or one
  // rank's block (allgather, all-to-all, gather, scatter): selectionBytes().
  size_t bytes = 0;
  const RankLayout* layout = nullptr;  // null: a group inside a communicator
  int ranks = 1;                       // the communicator's or the group's
  bool ncclRunsIt = false;             // NCCL has this collective for the call's type and op
  // A compressed call: its wire bytes per input byte (the cost model's
  // rail bytes). Allreduce and reduce-scatter then pick a compressed
  // algorithm; allgather a plain one for its wire size.
  bool compressed = false;
  double wireRatio = 1;
};

bool SelectionConditions::segmentServes(const SelectionKey& key) const { return sharedMemory && !key.onDevice; }

// The size a call is selected by (see SelectionKey::bytes).
size_t selectionBytes(const CollectiveArgs& args, int ranks);
// A call's key: its collective, size and compression, on `ranks` ranks
// laid out as `layout` (null: a group), in host or device memory.
SelectionKey selectionKeyOf(const CollectiveArgs& args, int ranks, const RankLayout* layout, bool onDevice);

struct Selection {
  Algorithm algorithm = Algorithm::Ring;
  // A flat algorithm has one provider: node == rail. Two-phase's node
  // phase runs on `node`, its rail phase on `rail`.
  Provider node = Provider::HostUcx;
  Provider rail = Provider::HostUcx;
  const char* rule = "";  // the table's row that chose it, as the INFO log names it
  // How the algorithm cuts the buffers into pipelined pieces
  // (FAIRWAY_SEGMENT_BYTES, FAIRWAY_SLICE_BYTES, ...): the selector's, which
  // outlives every call it plans.
  const PipelineSettings* pipeline = &kDefaultPipeline;
};

}  // namespace fairway
