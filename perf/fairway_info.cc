// fairway-info: what Fairway sees and would do here, like ucx_info.
//
// Alone it describes this process's machine as a one-rank job; under a
// launcher (fairwayrun, mpirun, srun, torchrun) it forms the job's
// communicator and rank 0 prints every rank: nodes, local ranks, the GPU and
// network device of each, the groups, which transports are available (and
// why not), and the plan per level and per collective and size.
//
// `fairway-info --config` prints every FAIRWAY_* variable instead: the value
// in effect here, whether it was set, and its meaning.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/launcher_env.h"
#include "comm/communicator.h"
#include "comm/communicator_factory.h"
#include "comm/local_machine.h"
#include "core/config.h"
#include "core/config_variables.h"
#include "core/environment.h"
#include "selection/selector.h"
#include "topo/net_device.h"

using namespace fairway;

namespace {

constexpr size_t kRecordBytes = 512;

std::string numaText(int numa) { return numa < 0 ? "?" : std::to_string(numa); }

void printTopology(const HwTopology& t) {
  std::printf("# Topology of this node (%s)\n", t.source.c_str());
  std::printf("  %d packages, %d NUMA nodes, %d cores, %d hardware threads\n", t.packages, t.numaNodes, t.cores,
              t.processingUnits);
  if (t.gpus.empty()) std::printf("  GPUs: none\n");
  for (size_t g = 0; g < t.gpus.size(); ++g) {
    const PciDevice& gpu = t.gpus[g];
    std::string nic = t.nicOfGpu[g] < 0 ? "none" : t.nics[t.nicOfGpu[g]].name;
    std::printf("  GPU %zu  %s %-8s NUMA %s  nearest NIC %s\n", g, gpu.busId.c_str(),
                gpu.name.empty() ? "-" : gpu.name.c_str(), numaText(gpu.numaNode).c_str(), nic.c_str());
  }
  if (t.nics.empty()) std::printf("  NICs: none on the PCI tree\n");
  for (const NetDevice& nic : t.nics) {
    std::printf("  NIC %-10s %s NUMA %s  %s\n", nic.name.c_str(), nic.busId.c_str(), numaText(nic.numaNode).c_str(),
                nic.rdma ? "RDMA (OpenFabrics)" : "socket interface");
  }
}

void printTransports(const LocalMachine& m, bool ucxReachesDevice) {
  std::printf("# Transports\n");
  std::printf("  %-14s available (host memory%s)\n", "ucx",
              ucxReachesDevice ? (m.device->memoryIsCuda() ? ", CUDA memory" : ", the emulated device's memory") : "");
  std::printf("  %-14s %s\n", "device runtime",
              m.cudaDevice.ok ? ("available; staged calls release their stream through " +
                                 std::string(m.device->streamWaitMethod())).c_str()
                              : ("unavailable: " + m.cudaDevice.reason).c_str());
  std::printf("  %-14s %s\n", "nccl", m.ncclAvailable.ok ? "available" : ("unavailable: " + m.ncclAvailable.reason).c_str());
}

// This rank's line, gathered to rank 0.
std::string describeRank(Communicator& comm) {
  const RankLayout& layout = comm.layout();
  const int rank = comm.rank();
  const PeerInfo& me = comm.messenger().peers()[rank];
  const HwTopology& topo = comm.machine().topology;
  const int localRank = layout.localRankOf(rank);
  const int gpu = gpuIndexForRank(topo, me.gpuBusId, localRank);
  const NetDeviceChoice& net = comm.netDevice();
  char line[kRecordBytes];
  std::snprintf(line, sizeof(line), "  rank %-3d host %-12s node %d (%s) local rank %d of %d  GPU %s  net %s (%s)",
                rank, me.host.c_str(), layout.nodeOf(rank), layout.nodeName(layout.nodeOf(rank)).c_str(), localRank,
                layout.localSizeOf(rank), gpu < 0 ? "none" : topo.gpus[gpu].busId.c_str(),
                net.ucxDevice.empty() ? "UCX's choice" : net.ucxDevice.c_str(), net.why.c_str());
  return line;
}

std::string rankList(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ",") + std::to_string(r);
  return "[" + text + "]";
}

void printGroups(const RankLayout& layout) {
  std::printf("# Groups: %s%s\n", layout.describe().c_str(),
              layout.nodeCount() > 1 && !layout.blocked() ? ", ranks of a node not contiguous" : "");
  for (int n = 0; n < layout.nodeCount(); ++n) {
    std::printf("  node %d %-12s ranks %s\n", n, layout.nodeName(n).c_str(), rankList(layout.ranksOfNode(n)).c_str());
  }
  std::printf("  leaders %s\n", rankList(layout.leaders()).c_str());
  for (int d = 0; d < layout.railCount(); ++d) std::printf("  rail %d  %s\n", d, rankList(layout.rail(d)).c_str());
}

std::string sizeText(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (bytes >= 1024 && bytes % 1024 == 0 && u < 3) {
    bytes /= 1024;
    ++u;
  }
  return std::to_string(bytes) + " " + units[u];
}

// Asks the selection table at every power of two and prints where its
// answer (algorithm and providers) changes, for host and device buffers.
void printSelections(const Communicator& comm, bool onDevice) {
  struct Probe { CollectiveKind kind; const char* what; fwDataType_t type; };
  const Probe probes[] = {
      {CollectiveKind::AllReduce, "allreduce (buffer size)", fwFloat32},
      {CollectiveKind::ReduceScatter, "reducescatter (buffer size)", fwFloat32},
      {CollectiveKind::AllGather, "allgather (per-rank block)", fwFloat32},
      {CollectiveKind::Broadcast, "broadcast", fwFloat32},
      {CollectiveKind::Reduce, "reduce", fwFloat32},
      {CollectiveKind::AllToAll, "alltoall", fwFloat32},
      {CollectiveKind::Gather, "gather/scatter", fwFloat32},
      {CollectiveKind::Barrier, "barrier", fwFloat32},
  };
  auto describe = [](const Selection& s) {
    std::string text = algorithmName(s.algorithm);
    if (s.node == s.rail) return text + " over " + providerName(s.node);
    return text + " (node " + providerName(s.node) + ", rail " + providerName(s.rail) + ")";
  };
  const NativeCollectivesEntry* nccl = const_cast<Communicator&>(comm).machine().nccl;
  for (const Probe& p : probes) {
    SelectionKey key;
    key.kind = p.kind;
    key.onDevice = onDevice;
    key.layout = &comm.layout();
    key.ranks = comm.size();
    key.ncclRunsIt = onDevice && ncclRuns(nccl, makeArgs(p.kind, nullptr, nullptr, 1, p.type));
    std::string text;
    size_t from = 0;
    std::string current = describe(comm.selector().select(key));
    for (size_t bytes = 1; bytes <= (size_t{1} << 34); bytes *= 2) {
      key.bytes = bytes;
      const std::string now = describe(comm.selector().select(key));
      if (now == current) continue;
      text += current + " [" + sizeText(from) + ", " + sizeText(bytes) + ")  ";
      current = now;
      from = bytes;
    }
    text += current + (from == 0 ? " at every size" : " from " + sizeText(from));
    std::printf("  %-28s %s\n", p.what, text.c_str());
  }
}

void printAlgorithms(const Communicator& comm) {
  std::printf("# Selection for host buffers on %s (FAIRWAY_ALGO overrides)\n", comm.layout().describe().c_str());
  printSelections(comm, false);
  const TransportPlan& plan = comm.plan();
  std::printf("# Device buffers (float32 sum; NCCL has no bitwise reductions)\n");
  if (!comm.selector().deviceRoutes().present) {
    std::printf("  none: every buffer is host memory here\n");
    return;
  }
  printSelections(comm, true);
  if (plan.deviceOverUcx == Provider::DeviceUcx) {
    std::printf("  UCX on device memory: the algorithms' copies and reductions run on the device; their scratch\n"
                "  is device memory, grown to what the largest call needed (as host scratch is)\n");
  }
  if (plan.deviceOverUcx == Provider::StagedUcx) {
    const size_t slice = comm.config().pipeline.stagingSliceBytes;
    std::printf("  staged through pinned memory: collectives run on the device, each message through a pooled\n"
                "  pinned bounce buffer (the pool holds what one call had in flight at once); fwSend and fwRecv\n"
                "  move in 2 x %zu KiB pinned slices (FAIRWAY_STAGING_SLICE_BYTES)\n",
                slice / 1024);
  }
}

// Every variable of the table: the value in effect (a Config's as it reads
// back, or the environment's text), "set" or "default", and the meaning.
int printVariables(const Config& config) {
  std::printf("# Environment variables (docs/environment.md)\n");
  for (const ConfigVariable& v : configVariables()) {
    const bool set = environmentValue(v.name) != nullptr;
    std::string value = v.show ? v.show(config) : (set ? environmentValue(v.name) : "");
    if (value.empty()) value = v.defaultText[0] != '\0' ? v.defaultText : "-";
    std::printf("  %-30s %-20s %-7s %s\n", v.name, value.c_str(), set ? "set" : "default", v.meaning);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool configOnly = argc == 2 && std::strcmp(argv[1], "--config") == 0;
  if (argc > 1 && !configOnly) {
    std::fprintf(stderr, "usage: fairway-info [--config]\n  run alone for this machine, or under a launcher for the whole job "
                         "(e.g. fairwayrun -np 8 --nodes 2 fairway-info)\n"
                         "  --config: every FAIRWAY_* variable, its value here and its meaning\n");
    return 2;
  }
  Config config;
  Status st = Config::fromEnvironment(&config);
  if (configOnly) {
    if (st.isOk()) return printVariables(config);
    std::fprintf(stderr, "fairway-info: %s\n", st.message().c_str());
    return 1;
  }
  std::unique_ptr<Communicator> comm;
  if (st.isOk() && launchedByLauncher()) {
    st = createFromLauncher(config, &comm);
  } else if (st.isOk()) {
    Communicator::OobAllgather alone = [](const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>* all) {
      *all = {mine};
      return Status::ok();
    };
    st = Communicator::create(alone, 0, 1, config, &comm);
  }
  if (!st.isOk()) {
    std::fprintf(stderr, "fairway-info: %s\n", st.message().c_str());
    return 1;
  }
  // Every rank's line to rank 0, over the communicator itself.
  std::string mine = describeRank(*comm);
  std::vector<char> record(kRecordBytes, 0), all(kRecordBytes * comm->size(), 0);
  std::memcpy(record.data(), mine.c_str(), std::min(mine.size(), kRecordBytes - 1));
  st = comm->collective(makeArgs(CollectiveKind::AllGather, record.data(), all.data(), kRecordBytes));
  if (st.isOk() && comm->rank() == 0) {
    LocalMachine& machine = comm->machine();
    std::printf("# Fairway %d.%d.%d, %d ranks\n", FAIRWAY_MAJOR, FAIRWAY_MINOR, FAIRWAY_PATCH, comm->size());
    printTopology(machine.topology);
    printTransports(machine, comm->plan().ucxReachesDeviceMemory);
    std::printf("# Ranks\n");
    for (int r = 0; r < comm->size(); ++r) std::printf("%s\n", all.data() + r * kRecordBytes);
    printGroups(comm->layout());
    std::printf("# Plan: %s\n", comm->plan().describe().c_str());
    for (const PlanReason& reason : comm->plan().reasons) {
      std::printf("  %s%s\n", reason.fallback ? "fallback: " : "", reason.text.c_str());
    }
    printAlgorithms(*comm);
  }
  Status closed = comm->destroy();
  if (st.isOk()) st = closed;
  if (!st.isOk()) {
    std::fprintf(stderr, "fairway-info: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}
