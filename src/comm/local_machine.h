// What this process can use, found once and shared by its communicators:
// the hwloc topology, the CUDA device runtime, and whether NCCL loads.
#pragma once

#include <memory>
#include <string>

#include "core/config.h"
#include "topo/hw_topology.h"
#include "topo/transport_plan.h"
#include "transports/device_runtime.h"
#include "transports/native_collectives.h"

namespace fairway {

struct LocalMachine {
  HwTopology topology;
  std::unique_ptr<DeviceRuntime> device;  // null without CUDA or a GPU
  Availability cudaDevice;
  const NativeCollectivesEntry* nccl = nullptr;  // null unless usable
  Availability ncclAvailable;

  // Loads on first use for a given FAIRWAY_TOPO_FILE and plugin path. A
  // topology file that cannot be read fails, naming it; live discovery that
  // fails leaves the topology empty with a warning.
  static Status get(const Config& config, LocalMachine** out);
};

}  // namespace fairway
