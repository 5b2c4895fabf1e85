// The plan: which transport serves each level (inside a node, between
// nodes) for host and for device buffers, from what this machine offers and
// the FAIRWAY_*TRANSPORT overrides. Every choice that was not the obvious
// one comes with a line saying why, logged once at communicator creation;
// an override that cannot be honoured fails the creation.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/provider.h"
#include "core/status.h"

namespace fairway {

// Whether something can be used here, and if not, why.
struct Availability {
  bool ok = false;
  std::string reason;
  static Availability yes() { return {true, ""}; }
  static Availability no(const std::string& why) { return {false, why}; }
};

struct PlanInputs {
  std::string forceAll = "auto";    // FAIRWAY_TRANSPORT
  std::string forceIntra = "auto";  // FAIRWAY_INTRA_TRANSPORT
  std::string forceInter = "auto";  // FAIRWAY_INTER_TRANSPORT
  int nodeCount = 1;
  Availability cudaDevice;          // device runtime plugin loaded and a GPU visible
  Availability nccl;                // NCCL plugin loaded and NCCL usable
  // UCX on every rank reaches device memory: CUDA memory for a CUDA-aware
  // UCX, the host memory of the host-emulated runtime for any UCX.
  bool ucxReachesDeviceMemory = false;
  std::string ucxDeviceMemory = "auto";  // FAIRWAY_UCX_DEVICE_MEMORY: auto|direct|staged
  // Ranks of one node that drive the same GPU, which NCCL refuses; empty if none.
  std::string sharedGpu;
};

struct PlanReason {
  bool fallback = false;  // something better was wanted but cannot run: logged as a warning
  std::string text;
};

// The transport of each level; which algorithm and provider a given
// collective uses is the selection table's (selection/selector.h).
struct TransportPlan {
  int nodeCount = 1;
  // Host buffers inside a node: the node's shared-memory segment, unless
  // UCX is forced there (FAIRWAY_INTRA_TRANSPORT=ucx, or FAIRWAY_TRANSPORT=ucx
  // with no intra-node choice); UCX between nodes. Where a node's segment
  // cannot be made, its ranks fall back to UCX (comm/communicator_shm.cc).
  bool hostSharedMemory = true;
  std::string hostIntraReason;  // why not, when it is not
  // Device buffers at each level: Nccl, DeviceUcx (UCX on device memory)
  // or StagedUcx (through pinned host buffers); empty where there are no
  // device buffers (no CUDA device), or between nodes on one node.
  std::optional<Provider> intraDevice;
  std::optional<Provider> interDevice;
  // How device buffers cross UCX wherever UCX carries them (collectives
  // NCCL has no form of included): DeviceUcx or StagedUcx.
  std::optional<Provider> deviceOverUcx;
  bool ucxReachesDeviceMemory = false;
  std::vector<PlanReason> reasons;  // one line per decision that needs explaining

  // Fails (fwInvalidUsage) when a forced transport cannot work here.
  static Status make(const PlanInputs& in, TransportPlan* out);
  std::string describe() const;
};

}  // namespace fairway
