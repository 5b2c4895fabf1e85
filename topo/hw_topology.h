// What one machine looks like to Fairway: cores, NUMA nodes, and the GPUs
// and NICs on its PCI tree, with each GPU paired to the NIC nearest to it.
// Discovered with hwloc, or read from an hwloc XML file (FAIRWAY_TOPO_FILE)
// so a test or a user can describe a machine they are not running on.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

struct hwloc_topology;  // hwloc.h, kept out of this header

namespace fairway {

struct PciDevice {
  std::string busId;      // "0000:17:00.0", lower case, as hwloc and CUDA print it
  std::string name;       // OS name: "cuda0", "mlx5_0", "eth0"; empty if hwloc saw none
  int numaNode = -1;      // OS index of the NUMA node it attaches to, -1 if unknown
};

struct NetDevice : PciDevice {
  bool rdma = false;      // an OpenFabrics (verbs) device, not just a socket interface
  // The device name UCX takes in UCX_NET_DEVICES: "mlx5_0:1" or "eth0".
  std::string ucxDeviceName() const;
};

struct HwTopology {
  int packages = 0;
  int numaNodes = 0;
  int cores = 0;
  int processingUnits = 0;
  std::vector<PciDevice> gpus;       // in PCI bus order
  std::vector<NetDevice> nics;       // in PCI bus order
  // For each GPU, the index in nics of the NIC fewest PCI hops away (ties go
  // to the lower bus id), or -1 when the machine has no NIC.
  std::vector<int> nicOfGpu;
  std::string source;                // "hwloc discovery" or the XML file read

  // Reads xmlFile when it is not empty, else discovers this machine. When
  // dumpFile is not empty, writes what was loaded there as hwloc XML.
  static Status load(const std::string& xmlFile, const std::string& dumpFile, HwTopology* out);
  // Reads hwloc XML from memory (the topology-file fuzzer's entry).
  static Status loadXmlBuffer(const char* xml, size_t bytes, HwTopology* out);

  // Index of the GPU with this PCI bus id, or -1.
  int gpuByBusId(const std::string& busId) const;

 private:
  // setSource points hwloc at the XML (or leaves discovery) and says whether it could.
  static Status loadFrom(const std::function<bool(::hwloc_topology*)>& setSource, const std::string& xmlFile,
                         const std::string& dumpFile, HwTopology* out);
};

}  // namespace fairway
