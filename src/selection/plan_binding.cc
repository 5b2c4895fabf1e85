#include "selection/plan_binding.h"

#include <string>

namespace fairway {

Status bindPlan(const Selection& plan, const PlanProviders& providers, BoundPlan* out) {
  auto lacking = [&](const char* what) {
    return Status(fwInternalError, std::string("the plan for ") + algorithmName(plan.algorithm) + " needs " + what +
                                       ", which this call has not");
  };
  BoundPlan bound;
  bound.selection = plan;
  bound.space = providers.buffers;
  if (bound.space == nullptr) return lacking("a data space for its buffers");
  switch (plan.node) {
    case Provider::HostShm:
      if (providers.segment == nullptr) return lacking("the node's segment (whole host communicators only)");
      bound.hierarchy.node = providers.segment;
      break;
    case Provider::Nccl:
      if (plan.rail == Provider::Nccl) return lacking("NCCL's own collective, which NCCL runs: no binding");
      if (providers.ncclNode == nullptr) return lacking("NCCL over the node's GPUs");
      bound.hierarchy.node = providers.ncclNode;
      break;
    default:
      break;
  }
  if (plan.rail == Provider::StagedUcx) {
    // Under NCCL's node phase the rail runs in pinned memory of its own;
    // otherwise every message goes through the wire's bounce buffers.
    if (plan.node == Provider::Nccl) {
      if (providers.pinnedRail == nullptr) return lacking("pinned host memory for its rail");
      bound.hierarchy.rail = providers.pinnedRail;
    } else {
      if (providers.stagedWire == nullptr) return lacking("the staged wire");
      bound.wire = providers.stagedWire;
    }
  }
  *out = bound;
  return Status::ok();
}

}  // namespace fairway
