#include "topo/transport_plan.h"

#include <vector>

namespace fairway {
namespace {

struct Level {
  const char* name;      // "intra-node"
  std::string forced;    // auto|ucx|nccl after FAIRWAY_TRANSPORT applies
  std::string variable;  // the variable that forced it, for messages
};

Level levelOf(const char* name, const std::string& specific, const char* specificVariable,
              const std::string& all) {
  if (specific != "auto") return Level{name, specific, specificVariable};
  return Level{name, all, "FAIRWAY_TRANSPORT"};
}

// Direct where UCX reaches device memory, unless FAIRWAY_UCX_DEVICE_MEMORY
// says staged (checked to be possible in make()).
Provider ucxPath(const PlanInputs& in) {
  if (in.ucxDeviceMemory == "staged") return Provider::StagedUcx;
  return in.ucxReachesDeviceMemory ? Provider::DeviceUcx : Provider::StagedUcx;
}

// A level's device path as the plan's lines write it.
const char* pathName(const std::optional<Provider>& path) { return path ? providerShortName(*path) : "none"; }

std::string stagingReason(const PlanInputs& in) {
  if (in.ucxDeviceMemory == "staged") return "; FAIRWAY_UCX_DEVICE_MEMORY=staged: staged through pinned host memory";
  return "; this UCX has no CUDA memory support, so buffers are staged through pinned host memory";
}

// Why NCCL cannot serve this communicator, or empty.
std::string ncclRefusal(const PlanInputs& in) {
  if (!in.nccl.ok) return in.nccl.reason;
  if (!in.sharedGpu.empty()) return in.sharedGpu + " (NCCL needs one GPU per rank)";
  return "";
}

Status chooseDevicePath(const PlanInputs& in, const Level& level, bool ncclByDefault, TransportPlan* plan,
                        std::optional<Provider>* out) {
  const std::string refusal = ncclRefusal(in);
  if (level.forced == "nccl") {
    if (!refusal.empty()) {
      return Status(fwInvalidUsage, level.variable + "=nccl cannot be honoured for the " + level.name +
                                        " level: " + refusal);
    }
    *out = Provider::Nccl;
    plan->reasons.push_back({false, std::string(level.name) + " device buffers: nccl, as " + level.variable + " asks"});
    return Status::ok();
  }
  if (level.forced == "auto" && ncclByDefault && refusal.empty()) {
    *out = Provider::Nccl;
    return Status::ok();
  }
  *out = ucxPath(in);
  std::string why = level.forced == "ucx" ? level.variable + "=ucx"
                                          : (ncclByDefault ? "NCCL is not usable: " + refusal
                                                           : std::string("UCX serves this level by default"));
  if (*out == Provider::StagedUcx) why += stagingReason(in);
  if (*out == Provider::DeviceUcx) why += "; UCX reaches device memory, so buffers go to it directly";
  // Falling back means NCCL was the default choice and cannot run.
  const bool fallback = level.forced == "auto" && ncclByDefault;
  plan->reasons.push_back({fallback, std::string(level.name) + " device buffers: " + pathName(*out) + " (" +
                                         why + ")"});
  return Status::ok();
}

}  // namespace

Status TransportPlan::make(const PlanInputs& in, TransportPlan* out) {
  TransportPlan plan;
  plan.nodeCount = in.nodeCount;
  plan.ucxReachesDeviceMemory = in.ucxReachesDeviceMemory;
  const Level intra = levelOf("intra-node", in.forceIntra, "FAIRWAY_INTRA_TRANSPORT", in.forceAll);
  const Level inter = levelOf("inter-node", in.forceInter, "FAIRWAY_INTER_TRANSPORT", in.forceAll);
  if (intra.forced == "ucx") {
    plan.hostSharedMemory = false;
    plan.hostIntraReason = std::string(intra.variable) + "=ucx";
  }
  const std::vector<const Level*> levels =
      in.nodeCount > 1 ? std::vector<const Level*>{&intra, &inter} : std::vector<const Level*>{&intra};
  for (const Level* level : levels) {
    if (level->forced == "nccl") {
      plan.reasons.push_back({false, std::string(level->name) + " host buffers: ucx (" + level->variable +
                                         "=nccl applies to device buffers; NCCL cannot reach host memory)"});
    }
  }

  if (!in.cudaDevice.ok) {
    for (const Level* level : levels) {
      if (level->forced == "nccl") {
        return Status(fwInvalidUsage, level->variable + "=nccl cannot be honoured for the " + level->name +
                                          " level: " + in.cudaDevice.reason);
      }
    }
    plan.reasons.push_back({false, "device buffers: none (" + in.cudaDevice.reason + ")"});
    *out = plan;
    return Status::ok();
  }

  if (in.ucxDeviceMemory == "direct" && !in.ucxReachesDeviceMemory) {
    return Status(fwInvalidUsage, "FAIRWAY_UCX_DEVICE_MEMORY=direct cannot be honoured: UCX does not report CUDA "
                                  "memory support on every rank (build against a CUDA-aware UCX, e.g. "
                                  "FAIRWAY_UCX_CMAKE_DIR)");
  }
  plan.deviceOverUcx = ucxPath(in);
  FW_RETURN_IF_ERROR(chooseDevicePath(in, intra, /*ncclByDefault=*/true, &plan, &plan.intraDevice));
  // Between nodes UCX is the default; NCCL only when asked for.
  if (in.nodeCount > 1) {
    FW_RETURN_IF_ERROR(chooseDevicePath(in, inter, /*ncclByDefault=*/false, &plan, &plan.interDevice));
  }

  if (in.nodeCount > 1 && plan.intraDevice == Provider::Nccl && plan.interDevice != Provider::Nccl) {
    plan.reasons.push_back({false, std::string("device collectives spanning ") + std::to_string(in.nodeCount) +
                                       " nodes: NCCL reaches only each node's ranks, so allreduce, reduce-scatter "
                                       "and allgather run two-phase (nccl inside each node, " +
                                       pathName(plan.interDevice) +
                                       " between nodes) on uniform layouts, and the rest " +
                                       pathName(plan.deviceOverUcx) +
                                       " on every rank (FAIRWAY_TRANSPORT=nccl: NCCL at every level)"});
  }
  *out = plan;
  return Status::ok();
}

std::string TransportPlan::describe() const {
  std::string text = hostSharedMemory ? "host buffers: shared memory inside nodes, ucx between them; device buffers: "
                                      : "host buffers: ucx at both levels (" + hostIntraReason + "); device buffers: ";
  if (!intraDevice) return text + "none";
  text += std::string("intra-node ") + pathName(intraDevice);
  if (nodeCount > 1) text += std::string(", inter-node ") + pathName(interDevice);
  text += std::string("; UCX carries device memory ") +
          (deviceOverUcx == Provider::DeviceUcx ? "directly" : "staged through pinned host memory");
  return text;
}

}  // namespace fairway
