// From a plan to what runs it: the data space of the call's buffers, the
// provider of each phase (Hierarchy) and the wire its messages take. The
// one binding that host calls, device calls and fairway-sim use: a caller
// says what it has (PlanProviders), the plan says what it needs.
#pragma once

#include "algorithms/context.h"
#include "algorithms/selection_key.h"
#include "algorithms/staged_wire.h"

namespace fairway {

// What a caller can run a plan on; null where it has none.
struct PlanProviders {
  DataSpace* buffers = nullptr;      // the call's buffers' memory: host, device, simulated
  NodePhase* segment = nullptr;      // the node's shared-memory segment (whole host communicators)
  NodePhase* ncclNode = nullptr;     // NCCL over this node's GPUs
  DataSpace* pinnedRail = nullptr;   // pinned host memory for a rail UCX cannot run on device memory
  StagedWire* stagedWire = nullptr;  // bounce buffers for device messages UCX cannot reach
};

struct BoundPlan {
  Selection selection;
  DataSpace* space = nullptr;
  Hierarchy hierarchy;
  StagedWire* wire = nullptr;
};

// Binds plan's providers to the caller's: the node phase to the segment
// or NCCL, a staged rail to pinned memory (NCCL inside the node) or to
// the staged wire (everything else). Fails with fwInternalError, naming
// the provider, where the plan needs one the caller lacks.
Status bindPlan(const Selection& plan, const PlanProviders& providers, BoundPlan* out);

}  // namespace fairway
