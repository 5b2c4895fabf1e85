// Which network device a rank's inter-node traffic leaves through: the NIC
// nearest its GPU on the PCI tree, so each GPU's rail has its own NIC.
#pragma once

#include <string>
#include <vector>

#include "topo/hw_topology.h"

namespace fairway {

// The GPU a rank drives: the one with its CUDA device's bus id when known,
// else local rank modulo the GPUs of the node; -1 on a machine without GPUs.
int gpuIndexForRank(const HwTopology& topology, const std::string& gpuBusId, int localRank);

struct NetDeviceChoice {
  std::string ucxDevice;  // for UCX_NET_DEVICES; empty leaves the choice to UCX
  std::string why;
};

// overrides: FAIRWAY_NET_DEVICES, local rank i takes entry i mod n. Without
// them, only RDMA NICs are pinned; plain interfaces are left to UCX, which
// knows which of them route to the peers.
NetDeviceChoice chooseNetDevice(const HwTopology& topology, int gpuIndex, int localRank,
                                const std::vector<std::string>& overrides);

}  // namespace fairway
