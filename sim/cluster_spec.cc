#include "sim/cluster_spec.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

namespace fairway::sim {
namespace {

// The presets, in the file format. Numbers are what each machine's parts
// are rated for or were measured at; docs/simulator.md says where from.
const std::map<std::string, std::string>& presets() {
  static const std::map<std::string, std::string> all = {
      {"h100-ndr400",
       "# 8 x H100 SXM per node on NVSwitch (NVLink 4: 450 GB/s each way per GPU),\n"
       "# 8 x 400 Gbit/s NDR InfiniBand NICs per node, one per GPU, on a\n"
       "# rail-optimized non-blocking fabric of 32-node leaves. Buffers in GPU\n"
       "# memory that UCX reaches directly (GPUDirect RDMA, CUDA IPC).\n"
       "ranks_per_node = 8\n"
       "intra_gbs = 450\n"
       "intra_latency_us = 1.5\n"
       "nics_per_node = 8\n"
       "nic_gbs = 50\n"
       "nic_latency_us = 2\n"
       "fabric = rail-optimized\n"
       "nodes_per_leaf = 32\n"
       "oversubscription = 1\n"
       "switch_latency_us = 0.3\n"
       "message_overhead_us = 3\n"
       "eager_bytes = 8192\n"
       "copy_gbs = 1500\n"
       "reduce_gbs = 1000\n"
       "codec_gbs = 800\n"
       "kernel_launch_us = 4\n"
       "cores_per_node = 0\n"
       "memory = device\n"
       "shared_memory_segment = no\n"},
      {"emulated-1g",
       "# This project's emulated cluster (scripts/emulate_cluster.sh -b 1gbit):\n"
       "# one network namespace per node, one veth link per node limited to\n"
       "# 1 Gbit/s each way by tbf (at MTU 9000, 0.7% of it is frame headers),\n"
       "# all links on one bridge. Ranks of a node share host memory and the\n"
       "# node's shared-memory segment; 2 CPU cores serve every rank.\n"
       "ranks_per_node = 4\n"
       "intra_gbs = 2.5\n"
       "intra_latency_us = 2\n"
       "bus_gbs = 2.5\n"
       "nics_per_node = 1\n"
       "nic_gbs = 0.1241\n"
       "nic_latency_us = 60\n"
       "fabric = fat-tree\n"
       "nodes_per_leaf = 64\n"
       "oversubscription = 1\n"
       "switch_latency_us = 5\n"
       "message_overhead_us = 5\n"
       "eager_bytes = 8192\n"
       "# One core's rates on this machine (copy_bandwidth, device_kernel_perf's\n"
       "# host kernels: float sum, int8 encode and decode-add), shared by every\n"
       "# rank of every node.\n"
       "copy_gbs = 5.8\n"
       "reduce_gbs = 4.5\n"
       "codec_gbs = 4\n"
       "kernel_launch_us = 0\n"
       "cores_in_cluster = 2\n"
       "memory = host\n"
       "shared_memory_segment = yes\n"},
      {"pcie-2node",
       "# Two nodes of 4 GPUs on PCIe Gen4 without NVLink: each GPU's x16 link\n"
       "# (25 GB/s each way) into one PCIe switch whose uplink the node's GPUs\n"
       "# share, and one 100 Gbit/s NIC per node behind the same switch.\n"
       "ranks_per_node = 4\n"
       "intra_gbs = 25\n"
       "intra_latency_us = 3\n"
       "bus_gbs = 25\n"
       "nics_per_node = 1\n"
       "nic_gbs = 12.5\n"
       "nic_latency_us = 3\n"
       "fabric = fat-tree\n"
       "nodes_per_leaf = 2\n"
       "oversubscription = 1\n"
       "switch_latency_us = 0.5\n"
       "message_overhead_us = 3\n"
       "eager_bytes = 8192\n"
       "copy_gbs = 800\n"
       "reduce_gbs = 600\n"
       "codec_gbs = 500\n"
       "kernel_launch_us = 4\n"
       "cores_per_node = 0\n"
       "memory = device\n"
       "shared_memory_segment = no\n"},
  };
  return all;
}

bool parseDouble(const std::string& text, double low, double* out) {
  const char* start = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(start, &end);
  if (errno != 0 || end == start || *end != '\0' || !std::isfinite(v) || v < low) return false;
  *out = v;
  return true;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

}  // namespace

Status parseClusterSpec(const std::string& text, const std::string& origin, ClusterSpec* out) {
  ClusterSpec spec = *out;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    line = trim(line);
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    const std::string where = origin + ":" + std::to_string(number) + ": ";
    if (eq == std::string::npos) return Status(fwInvalidArgument, where + "'" + line + "' is not key = value");
    const std::string key = trim(line.substr(0, eq));
    const std::string value = trim(line.substr(eq + 1));
    auto number_ = [&](double low, double* field) -> Status {
      if (parseDouble(value, low, field)) return Status::ok();
      return Status(fwInvalidArgument, where + key + " = " + value + ": expected a number of at least " +
                                           std::to_string(low));
    };
    auto positive = [&](double* field) -> Status {
      FW_RETURN_IF_ERROR(number_(0, field));
      if (*field > 0) return Status::ok();
      return Status(fwInvalidArgument, where + key + " = " + value + ": expected a number above 0");
    };
    auto count = [&](int* field) -> Status {
      double v = 0;
      if (!parseDouble(value, 1, &v) || v != std::floor(v) || v > 1 << 20) {
        return Status(fwInvalidArgument, where + key + " = " + value + ": expected a whole number from 1");
      }
      *field = static_cast<int>(v);
      return Status::ok();
    };
    auto yesNo = [&](bool* field) -> Status {
      if (value == "yes" || value == "true" || value == "1") *field = true;
      else if (value == "no" || value == "false" || value == "0") *field = false;
      else return Status(fwInvalidArgument, where + key + " = " + value + ": expected yes or no");
      return Status::ok();
    };
    Status st;
    double bytes = 0;
    if (key == "name") spec.name = value;
    else if (key == "ranks_per_node") st = count(&spec.ranksPerNode);
    else if (key == "intra_gbs") st = positive(&spec.intraGBs);
    else if (key == "intra_latency_us") st = number_(0, &spec.intraLatencyUs);
    else if (key == "bus_gbs") st = number_(0, &spec.busGBs);
    else if (key == "nics_per_node") st = count(&spec.nicsPerNode);
    else if (key == "nic_gbs") st = positive(&spec.nicGBs);
    else if (key == "nic_latency_us") st = number_(0, &spec.nicLatencyUs);
    else if (key == "fabric") {
      if (value == "rail-optimized") spec.fabric = ClusterSpec::Fabric::RailOptimized;
      else if (value == "fat-tree") spec.fabric = ClusterSpec::Fabric::FatTree;
      else st = Status(fwInvalidArgument, where + "fabric = " + value + ": expected rail-optimized or fat-tree");
    } else if (key == "nodes_per_leaf") st = count(&spec.nodesPerLeaf);
    else if (key == "oversubscription") {
      st = number_(1, &spec.oversubscription);
    } else if (key == "switch_latency_us") st = number_(0, &spec.switchLatencyUs);
    else if (key == "message_overhead_us") st = number_(0, &spec.messageOverheadUs);
    else if (key == "eager_bytes") {
      st = number_(0, &bytes);
      spec.eagerBytes = static_cast<size_t>(bytes);
    } else if (key == "copy_gbs") st = positive(&spec.copyGBs);
    else if (key == "reduce_gbs") st = positive(&spec.reduceGBs);
    else if (key == "codec_gbs") st = positive(&spec.codecGBs);
    else if (key == "kernel_launch_us") st = number_(0, &spec.kernelLaunchUs);
    else if (key == "cores_per_node") st = number_(0, &spec.coresPerNode);
    else if (key == "cores_in_cluster") st = number_(0, &spec.coresInCluster);
    else if (key == "memory") {
      if (value == "device") spec.onDevice = true;
      else if (value == "host") spec.onDevice = false;
      else st = Status(fwInvalidArgument, where + "memory = " + value + ": expected device or host");
    } else if (key == "shared_memory_segment") st = yesNo(&spec.sharedMemorySegment);
    else return Status(fwInvalidArgument, where + "unknown key '" + key + "' (docs/simulator.md lists the keys)");
    FW_RETURN_IF_ERROR(st);
  }
  if (spec.sharedMemorySegment && spec.onDevice) {
    return Status(fwInvalidArgument, origin + ": shared_memory_segment = yes needs memory = host (the segment "
                                              "carries host buffers only)");
  }
  *out = spec;
  return Status::ok();
}

Status loadClusterSpec(const std::string& path, ClusterSpec* out) {
  std::ifstream in(path);
  if (!in) return Status(fwInvalidArgument, "cannot read the cluster file " + path);
  std::stringstream text;
  text << in.rdbuf();
  ClusterSpec spec;
  spec.name = path;
  FW_RETURN_IF_ERROR(parseClusterSpec(text.str(), path, &spec));
  *out = spec;
  return Status::ok();
}

const std::vector<std::string>& presetNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& p : presets()) n.push_back(p.first);
    return n;
  }();
  return names;
}

Status clusterPresetText(const std::string& name, std::string* text) {
  const auto it = presets().find(name);
  if (it == presets().end()) {
    std::string known;
    for (const auto& n : presetNames()) known += (known.empty() ? "" : ", ") + n;
    return Status(fwInvalidArgument, "no preset named '" + name + "' (presets: " + known + ")");
  }
  *text = it->second;
  return Status::ok();
}

Status clusterPreset(const std::string& name, ClusterSpec* out) {
  std::string text;
  FW_RETURN_IF_ERROR(clusterPresetText(name, &text));
  ClusterSpec spec;
  spec.name = name;
  FW_RETURN_IF_ERROR(parseClusterSpec(text, "preset " + name, &spec));
  *out = spec;
  return Status::ok();
}

}  // namespace fairway::sim
