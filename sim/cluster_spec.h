// What fairway-sim simulates: the machine (ranks per node and how they
// reach each other inside a node), the nodes' NICs and the fabric between
// them, the cost of a message and of the work on its data, and the
// memory the buffers live in. Read from a small file of `key = value`
// lines (docs/simulator.md describes every key); presets for common
// machines are the same text built in (clusterPreset).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace fairway::sim {

struct ClusterSpec {
  std::string name = "custom";
  int ranksPerNode = 8;
  // Inside a node: each rank's link to the node's switch (NVLink to
  // NVSwitch), or, with a bus, every intra-node message also crossing one
  // link the node's ranks share (PCIe root complex, host memory).
  double intraGBs = 5;
  double intraLatencyUs = 1;
  double busGBs = 0;  // 0: no shared bus
  // Between nodes: NICs per node (rails), local rank d on NIC d * nics / ranksPerNode.
  int nicsPerNode = 1;
  double nicGBs = 1.25;
  double nicLatencyUs = 5;
  // The fabric: a switch hop's latency; leaves of nodesPerLeaf nodes
  // (rail-optimized: one leaf per rail of each group of nodes) with uplinks
  // oversubscribed by `oversubscription` (1: non-blocking).
  enum class Fabric { RailOptimized, FatTree } fabric = Fabric::RailOptimized;
  int nodesPerLeaf = 32;
  double oversubscription = 1;
  double switchLatencyUs = 0.5;
  // Every message: software cost on top of the links' latency; messages
  // up to eagerBytes go without waiting for their receive (larger ones
  // wait for it: a rendezvous, one more latency).
  double messageOverheadUs = 2;
  size_t eagerBytes = 8192;
  // Work on the data, per rank: copies, reductions and compression
  // kernels, each with a start-up cost (a kernel launch on a GPU).
  double copyGBs = 20;
  double reduceGBs = 10;
  double codecGBs = 10;
  double kernelLaunchUs = 0;
  // Processors that work shares, where ranks share them: 0, every rank has
  // its own (a GPU each); otherwise the cores of a node, or of the whole
  // cluster (an emulated cluster on one host). The rates above are one
  // core's.
  double coresPerNode = 0;
  double coresInCluster = 0;
  // Where the buffers are: "device" (GPU memory UCX reaches directly, no
  // NCCL) or "host"; and whether each node has its shared-memory segment.
  bool onDevice = false;
  bool sharedMemorySegment = false;
};

// Parses the text of a spec file over the defaults above; the error names
// the line and the key.
Status parseClusterSpec(const std::string& text, const std::string& origin, ClusterSpec* out);
Status loadClusterSpec(const std::string& path, ClusterSpec* out);
// The built-in presets: their text (as a file would hold it), and their names.
const std::vector<std::string>& presetNames();
Status clusterPresetText(const std::string& name, std::string* text);
Status clusterPreset(const std::string& name, ClusterSpec* out);

}  // namespace fairway::sim
