#include "topo/net_device.h"

namespace fairway {

int gpuIndexForRank(const HwTopology& topology, const std::string& gpuBusId, int localRank) {
  if (topology.gpus.empty()) return -1;
  if (!gpuBusId.empty()) {
    int index = topology.gpuByBusId(gpuBusId);
    if (index >= 0) return index;
  }
  return localRank % static_cast<int>(topology.gpus.size());
}

NetDeviceChoice chooseNetDevice(const HwTopology& topology, int gpuIndex, int localRank,
                                const std::vector<std::string>& overrides) {
  if (!overrides.empty()) {
    return {overrides[localRank % overrides.size()], "FAIRWAY_NET_DEVICES, entry for local rank " +
                                                        std::to_string(localRank)};
  }
  if (gpuIndex >= 0 && topology.nicOfGpu[gpuIndex] >= 0) {
    const NetDevice& nic = topology.nics[topology.nicOfGpu[gpuIndex]];
    const std::string gpu = "GPU " + topology.gpus[gpuIndex].busId;
    if (nic.rdma) return {nic.ucxDeviceName(), "nearest NIC to " + gpu};
    return {"", "the NIC nearest to " + gpu + " (" + nic.name + ") has no RDMA; UCX chooses the interface"};
  }
  std::vector<const NetDevice*> rdma;
  for (const NetDevice& nic : topology.nics) {
    if (nic.rdma) rdma.push_back(&nic);
  }
  if (rdma.empty()) return {"", "no RDMA NIC found; UCX chooses the interface"};
  return {rdma[localRank % rdma.size()]->ucxDeviceName(), "RDMA NIC by local rank (no GPU)"};
}

}  // namespace fairway
