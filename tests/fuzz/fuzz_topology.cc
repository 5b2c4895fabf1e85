// libFuzzer target: a topology file (FAIRWAY_TOPO_FILE) as hwloc XML, read
// through the same code that classifies GPUs and NICs and pairs them.
#include <hwloc.h>

#include <cstddef>
#include <cstdint>

#include "topo/hw_topology.h"

using namespace fairway;

// hwloc loads its plugins (libxml2's XML reader among them) with the first
// topology and unloads them with the last; unloading libxml2 drops the
// pointers to its one-time parser state, which LeakSanitizer then reports
// as leaked on every input. One topology held for the whole run keeps the
// plugins loaded, so only leaks of the input's own parse are reported.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static hwloc_topology_t keepPluginsLoaded = nullptr;
  hwloc_topology_init(&keepPluginsLoaded);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  HwTopology topology;
  if (!HwTopology::loadXmlBuffer(reinterpret_cast<const char*>(data), size, &topology).isOk()) return 0;
  if (topology.nicOfGpu.size() != topology.gpus.size()) __builtin_trap();
  for (int nic : topology.nicOfGpu) {
    if (nic < -1 || nic >= static_cast<int>(topology.nics.size())) __builtin_trap();
  }
  return 0;
}
