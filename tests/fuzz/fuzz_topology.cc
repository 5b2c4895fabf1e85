// libFuzzer target: a topology file (FAIRWAY_TOPO_FILE) as hwloc XML, read
// through the same code that classifies GPUs and NICs and pairs them.
#include <cstddef>
#include <cstdint>

#include "topo/hw_topology.h"

using namespace fairway;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  HwTopology topology;
  if (!HwTopology::loadXmlBuffer(reinterpret_cast<const char*>(data), size, &topology).isOk()) return 0;
  if (topology.nicOfGpu.size() != topology.gpus.size()) __builtin_trap();
  for (int nic : topology.nicOfGpu) {
    if (nic < -1 || nic >= static_cast<int>(topology.nics.size())) __builtin_trap();
  }
  return 0;
}
