// Communicator::create, step by step: each rank describes itself, the
// ranks exchange those records, every rank plans the same transports from
// them, connects inside its node and then between nodes, and starts its
// messenger; the communicator then maps the node's shared-memory segment.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <set>
#include <string>

#include "comm/communicator.h"
#include "comm/transport_loader.h"
#include "core/log.h"

namespace fairway {
namespace {

// The plan must be the same on every rank, so it is made from what all
// ranks reported: a capability counts only when every rank has it.
PlanInputs planInputs(const Config& config, const RankLayout& layout, const std::vector<PeerInfo>& peers,
                      const LocalMachine& machine) {
  PlanInputs in;
  in.forceAll = config.transport;
  in.forceIntra = config.intraTransport;
  in.forceInter = config.interTransport;
  in.nodeCount = layout.nodeCount();
  in.ucxDeviceMemory = config.ucxDeviceMemory;
  in.ucxReachesDeviceMemory = true;
  in.cudaDevice = machine.cudaDevice;
  in.nccl = machine.ncclAvailable;
  for (size_t r = 0; r < peers.size(); ++r) {
    if (in.cudaDevice.ok && !peers[r].hasCudaDevice) in.cudaDevice = Availability::no("rank " + std::to_string(r) + " has no CUDA device");
    if (in.nccl.ok && !peers[r].hasNccl) in.nccl = Availability::no("NCCL is not usable on rank " + std::to_string(r));
    in.ucxReachesDeviceMemory = in.ucxReachesDeviceMemory && peers[r].ucxReachesDeviceMemory;
  }
  for (int node = 0; node < layout.nodeCount() && in.sharedGpu.empty(); ++node) {
    const std::vector<int>& ranks = layout.ranksOfNode(node);
    for (size_t i = 0; i < ranks.size() && in.sharedGpu.empty(); ++i) {
      for (size_t j = i + 1; j < ranks.size(); ++j) {
        const std::string& bus = peers[ranks[i]].gpuBusId;
        if (!bus.empty() && bus == peers[ranks[j]].gpuBusId) {
          in.sharedGpu = "ranks " + std::to_string(ranks[i]) + " and " + std::to_string(ranks[j]) + " share GPU " +
                         bus + " on node " + layout.nodeName(node);
          break;
        }
      }
    }
  }
  return in;
}

std::vector<std::vector<uint8_t>> addressesFor(const std::vector<std::vector<uint8_t>>& all,
                                               const std::vector<int>& routeOfPeer, int route) {
  std::vector<std::vector<uint8_t>> out(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    if (routeOfPeer[r] == route) out[r] = all[r];
  }
  return out;
}

Status exchange(const Communicator::OobAllgather& oob, int size, const std::vector<uint8_t>& mine,
                std::vector<std::vector<uint8_t>>* all) {
  FW_RETURN_IF_ERROR(oob(mine, all));
  if (static_cast<int>(all->size()) != size) {
    return Status(fwInternalError, "out-of-band exchange returned " + std::to_string(all->size()) + " records for " +
                                       std::to_string(size) + " ranks");
  }
  return Status::ok();
}

// What the steps of creation build, in the order they build it.
struct Formation {
  Formation(const Communicator::OobAllgather& oob, int rank, int size, const Config& config)
      : oob(oob), rank(rank), size(size), config(config) {}

  const Communicator::OobAllgather& oob;
  int rank;
  int size;
  const Config& config;
  LocalMachine* machine = nullptr;
  Selector selector;
  TransportInitArgs transportArgs;
  std::unique_ptr<Transport> intra;  // every transport UCX has, for peers on this node
  PeerInfo mine;
  std::vector<PeerInfo> peers;
  std::vector<bool> sameHost;        // peers whose process memory this one can read
  RankLayout layout;
  uint64_t identity = 0;             // a hash of every rank's record: the same on each, new for each communicator
  TransportPlan plan;
  TransportRoutes routes;
  NetDeviceChoice net{"", "one node: no inter-node traffic"};
};

// Messages move over UCX: inside a node over every transport UCX has
// (shared memory first), between nodes over the network only. Host
// collectives inside a node run on the node's segment instead, where it
// maps (attachSharedMemory, after the connections).
Status openIntraNodeTransport(Formation& f) {
  f.transportArgs.rank = f.rank;
  f.transportArgs.size = f.size;
  f.transportArgs.timeoutMs = f.config.timeoutMs;
  return createTransport("ucx", f.config.pluginPath, f.transportArgs, &f.intra);
}

// This rank's record: host, node, GPU, what it can run, its UCX address.
void describeThisRank(Formation& f) {
  const LocalMachine& machine = *f.machine;
  f.mine = PeerInfo::forThisProcess(f.config.nodeId);
  f.mine.hasCudaDevice = machine.cudaDevice.ok;
  f.mine.hasNccl = machine.ncclAvailable.ok;
  // The host-emulated runtime's device memory is host memory, which any UCX reaches.
  f.mine.ucxReachesDeviceMemory =
      machine.device != nullptr && (!machine.device->memoryIsCuda() || f.intra->capabilities().cudaMemory);
  if (machine.device) {
    int ordinal = 0;
    (void)machine.device->currentDevice(&ordinal, &f.mine.gpuBusId);
  }
  f.mine.transportAddress = f.intra->localAddress();
}

Status exchangeRankRecords(Formation& f) {
  std::vector<std::vector<uint8_t>> records;
  FW_RETURN_IF_ERROR(exchange(f.oob, f.size, f.mine.encode(), &records));
  f.peers.resize(f.size);
  f.sameHost.resize(f.size);
  std::vector<std::string> nodeOfRank(f.size);
  for (int r = 0; r < f.size; ++r) {
    FW_RETURN_IF_ERROR(PeerInfo::decode(records[r], &f.peers[r]).withContext("record of rank " + std::to_string(r)));
    nodeOfRank[r] = f.peers[r].nodeId;
    f.sameHost[r] = f.mine.sharesProcessSpaceWith(f.peers[r]);
  }
  f.layout = RankLayout(nodeOfRank);
  uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (const auto& record : records) {
    for (uint8_t byte : record) hash = (hash ^ byte) * 1099511628211ull;
    hash = (hash ^ 0xff) * 1099511628211ull;
  }
  f.identity = hash;
  return Status::ok();
}

// Planned from the exchanged records alone, before any connection: every
// rank reaches the same verdict, so a plan that cannot run fails on all of
// them with its reason, not on one while another is half-way through
// connecting to it.
Status planTransports(Formation& f) {
  FW_RETURN_IF_ERROR(TransportPlan::make(planInputs(f.config, f.layout, f.peers, *f.machine), &f.plan));
  if (f.rank == 0) {
    for (const PlanReason& reason : f.plan.reasons) {
      FW_LOG_AT(reason.fallback ? LogLevel::Warn : LogLevel::Info, Init, "plan: %s", reason.text.c_str());
    }
    FW_LOG(Info, Init, "plan: %s", f.plan.describe().c_str());
  }
  f.selector.setDeviceRoutes(DeviceRoutes::of(f.plan));
  return Status::ok();
}

Status connectInsideNodes(Formation& f) {
  f.routes.transportOfPeer.assign(f.size, 0);
  for (int r = 0; r < f.size; ++r) {
    f.routes.transportOfPeer[r] = f.layout.nodeOf(r) == f.layout.nodeOf(f.rank) ? 0 : 1;
  }
  std::vector<std::vector<uint8_t>> addresses(f.size);
  for (int r = 0; r < f.size; ++r) addresses[r] = f.peers[r].transportAddress;
  FW_RETURN_IF_ERROR(f.intra->connect(addressesFor(addresses, f.routes.transportOfPeer, 0), f.sameHost));
  f.routes.transports.push_back(std::move(f.intra));
  return Status::ok();
}

// A second UCX instance, network transports only, through the device
// chosen for this rank; every rank of a multi-node communicator takes this
// step, so its exchange stays collective.
Status connectBetweenNodes(Formation& f) {
  if (f.layout.nodeCount() == 1) return Status::ok();
  const int localRank = f.layout.localRankOf(f.rank);
  const int gpuIndex = gpuIndexForRank(f.machine->topology, f.mine.gpuBusId, localRank);
  f.net = chooseNetDevice(f.machine->topology, gpuIndex, localRank, f.config.netDevices);
  // The node's rails for the cost model: the distinct NICs its local ranks
  // choose (each rank works out every local rank's choice, as it does its
  // own, so all agree without an exchange).
  std::set<std::string> nics;
  for (int l = 0; l < f.layout.localSizeOf(f.rank); ++l) {
    const NetDeviceChoice other =
        chooseNetDevice(f.machine->topology, gpuIndexForRank(f.machine->topology, "", l), l, f.config.netDevices);
    nics.insert(other.ucxDevice);  // "" (UCX's choice) counts as one NIC
  }
  f.selector.setRails(static_cast<int>(nics.size()));
  TransportInitArgs args = f.transportArgs;
  args.networkOnly = true;
  args.netDevice = f.net.ucxDevice;
  std::unique_ptr<Transport> inter;
  Status created = createTransport("ucx", f.config.pluginPath, args, &inter);
  if (!created.isOk() && !f.net.ucxDevice.empty() && f.config.netDevices.empty()) {
    // The topology named a NIC UCX cannot open here (a topology file from
    // another machine, a port that is down): UCX's own choice still works.
    FW_LOG(Warn, Init, "rank %d: network device %s (%s) is not usable: %s; UCX chooses instead", f.rank,
           f.net.ucxDevice.c_str(), f.net.why.c_str(), created.message().c_str());
    f.net = NetDeviceChoice{"", "UCX's choice after " + f.net.ucxDevice + " failed"};
    args.netDevice.clear();
    created = createTransport("ucx", f.config.pluginPath, args, &inter);
  }
  FW_RETURN_IF_ERROR(created.withContext("inter-node level (FAIRWAY_NET_DEVICES, UCX_TLS, UCX_NET_DEVICES)"));
  std::vector<std::vector<uint8_t>> addresses;
  FW_RETURN_IF_ERROR(exchange(f.oob, f.size, inter->localAddress(), &addresses));
  // Network transports report a dead peer themselves.
  FW_RETURN_IF_ERROR(inter->connect(addressesFor(addresses, f.routes.transportOfPeer, 1),
                                    std::vector<bool>(f.size, false)));
  f.routes.transports.push_back(std::move(inter));
  FW_LOG(Info, Init, "rank %d: inter-node network device %s (%s)", f.rank,
         f.net.ucxDevice.empty() ? "chosen by UCX" : f.net.ucxDevice.c_str(), f.net.why.c_str());
  return Status::ok();
}

// Idle waits yield the core when the host runs more of the job's processes
// than it has CPUs.
Status startMessenger(Formation& f, std::unique_ptr<Messenger>* out) {
  int ranksOnHost = 0;
  for (bool same : f.sameHost) ranksOnHost += same ? 1 : 0;
  // The most ranks any communicator of this process has seen on this host:
  // a split (or a node's group) of a few ranks still shares the cores with
  // the job's other processes, so it must yield as the whole job does.
  static std::atomic<int> mostRanksOnHost{0};
  int seen = mostRanksOnHost.load();
  while (seen < ranksOnHost && !mostRanksOnHost.compare_exchange_weak(seen, ranksOnHost)) {}
  const int processesOnHost = std::max(seen, ranksOnHost);
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const bool oversubscribed = cpus > 0 && processesOnHost > cpus;
  *out = std::make_unique<Messenger>(std::move(f.routes), f.rank, std::move(f.peers), f.config, oversubscribed);
  FW_RETURN_IF_ERROR((*out)->start());
  FW_LOG(Info, Init, "rank %d of %d: node %d of %d (%s), local rank %d of %d, %d ranks on %ld CPUs: idle waits %s",
         f.rank, f.size, f.layout.nodeOf(f.rank), f.layout.nodeCount(), f.layout.describe().c_str(),
         f.layout.localRankOf(f.rank), f.layout.localSizeOf(f.rank), processesOnHost, cpus,
         oversubscribed ? "yield the core" : "keep the core");
  return Status::ok();
}

}  // namespace

Status Communicator::create(const OobAllgather& oob, int rank, int size, const Config& config,
                            std::unique_ptr<Communicator>* out) {
  Formation f(oob, rank, size, config);
  FW_RETURN_IF_ERROR(Selector::create(config.algoOverrides, &f.selector));
  f.selector.setLinks(config.intraLink, config.interLink);
  f.selector.setPipeline(config.pipeline);
  FW_RETURN_IF_ERROR(LocalMachine::get(config, &f.machine));
  FW_RETURN_IF_ERROR(openIntraNodeTransport(f));
  describeThisRank(f);
  FW_RETURN_IF_ERROR(exchangeRankRecords(f));
  FW_RETURN_IF_ERROR(planTransports(f));
  FW_RETURN_IF_ERROR(connectInsideNodes(f));
  FW_RETURN_IF_ERROR(connectBetweenNodes(f));
  std::unique_ptr<Messenger> messenger;
  FW_RETURN_IF_ERROR(startMessenger(f, &messenger));
  out->reset(new Communicator(config, f.selector, std::move(messenger), f.layout, f.plan, f.machine, f.net));
  char name[24];
  std::snprintf(name, sizeof(name), "%016llx", static_cast<unsigned long long>(f.identity));
  (*out)->traceName_ = name;
  FW_RETURN_IF_ERROR((*out)->attachSharedMemory());
  // The cost model matters only across nodes.
  if (config.measureLinks && f.layout.nodeCount() > 1) FW_RETURN_IF_ERROR((*out)->adoptMeasuredLinks());
  return Status::ok();
}

}  // namespace fairway
