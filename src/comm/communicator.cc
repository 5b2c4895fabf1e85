#include "comm/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "algorithms/dispatch.h"
#include "comm/link_probe.h"
#include "comm/transport_loader.h"
#include "core/datatype.h"
#include "core/log.h"
#include "p2p/tags.h"

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

// What the selection table may use for device buffers, from the plan.
DeviceRoutes deviceRoutesOf(const TransportPlan& plan) {
  DeviceRoutes routes;
  routes.present = plan.intraDevice != DevicePath::None;
  const bool ncclInside = plan.intraDevice == DevicePath::Nccl;
  routes.ncclEverywhere = ncclInside && (plan.nodeCount == 1 || plan.interDevice == DevicePath::Nccl);
  routes.ncclInNodes = ncclInside && !routes.ncclEverywhere;
  routes.ucxDirect = plan.deviceOverUcx == DevicePath::Ucx;
  return routes;
}

}  // namespace

Status Communicator::create(const OobAllgather& oob, int rank, int size, const Config& config,
                            std::unique_ptr<Communicator>* out) {
  Selector selector;
  FW_RETURN_IF_ERROR(Selector::create(config.algoOverrides, &selector));
  selector.setLinks(config.intraLink, config.interLink);
  LocalMachine* machine = nullptr;
  FW_RETURN_IF_ERROR(LocalMachine::get(config, &machine));

  // Messages move over UCX: inside a node over every transport UCX has
  // (shared memory first), between nodes over the network only. Host
  // collectives inside a node run on the node's segment instead, where it
  // maps (attachSharedMemory, after the connections).
  TransportInitArgs args;
  args.rank = rank;
  args.size = size;
  args.timeoutMs = config.timeoutMs;
  std::unique_ptr<Transport> intra;
  FW_RETURN_IF_ERROR(createTransport("ucx", config.pluginPath, args, &intra));

  PeerInfo mine = PeerInfo::forThisProcess(config.nodeId);
  mine.hasCudaDevice = machine->cudaDevice.ok;
  mine.hasNccl = machine->ncclAvailable.ok;
  // The host-emulated runtime's device memory is host memory, which any UCX reaches.
  mine.ucxReachesDeviceMemory =
      machine->device != nullptr && (!machine->device->memoryIsCuda() || intra->capabilities().cudaMemory);
  if (machine->device) {
    int ordinal = 0;
    (void)machine->device->currentDevice(&ordinal, &mine.gpuBusId);
  }
  mine.transportAddress = intra->localAddress();
  std::vector<std::vector<uint8_t>> records;
  FW_RETURN_IF_ERROR(exchange(oob, size, mine.encode(), &records));
  std::vector<PeerInfo> peers(size);
  std::vector<std::string> nodeOfRank(size);
  std::vector<std::vector<uint8_t>> intraAddresses(size);
  std::vector<bool> sameHost(size);
  for (int r = 0; r < size; ++r) {
    FW_RETURN_IF_ERROR(PeerInfo::decode(records[r], &peers[r]).withContext("record of rank " + std::to_string(r)));
    nodeOfRank[r] = peers[r].nodeId;
    intraAddresses[r] = peers[r].transportAddress;
    sameHost[r] = mine.sharesProcessSpaceWith(peers[r]);
  }
  RankLayout layout(nodeOfRank);
  // Planned from the exchanged records alone, before any connection: every
  // rank reaches the same verdict, so a plan that cannot run fails on all of
  // them with its reason, not on one while another is half-way through
  // connecting to it.
  TransportPlan plan;
  FW_RETURN_IF_ERROR(
      TransportPlan::make(planInputs(config, layout, peers, *machine), &plan));
  if (rank == 0) {
    for (const PlanReason& reason : plan.reasons) {
      FW_LOG_AT(reason.fallback ? LogLevel::Warn : LogLevel::Info, Init, "plan: %s", reason.text.c_str());
    }
    FW_LOG(Info, Init, "plan: %s", plan.describe().c_str());
  }
  selector.setDeviceRoutes(deviceRoutesOf(plan));
  TransportRoutes routes;
  routes.transportOfPeer.assign(size, 0);
  for (int r = 0; r < size; ++r) routes.transportOfPeer[r] = layout.nodeOf(r) == layout.nodeOf(rank) ? 0 : 1;
  FW_RETURN_IF_ERROR(intra->connect(addressesFor(intraAddresses, routes.transportOfPeer, 0), sameHost));
  routes.transports.push_back(std::move(intra));

  const int localRank = layout.localRankOf(rank);
  const int gpuIndex = gpuIndexForRank(machine->topology, mine.gpuBusId, localRank);
  NetDeviceChoice net{"", "one node: no inter-node traffic"};
  if (layout.nodeCount() > 1) {
    // Every rank takes this branch, so the second exchange stays collective.
    net = chooseNetDevice(machine->topology, gpuIndex, localRank, config.netDevices);
    args.networkOnly = true;
    args.netDevice = net.ucxDevice;
    std::unique_ptr<Transport> inter;
    Status created = createTransport("ucx", config.pluginPath, args, &inter);
    if (!created.isOk() && !net.ucxDevice.empty() && config.netDevices.empty()) {
      // The topology named a NIC UCX cannot open here (a topology file from
      // another machine, a port that is down): UCX's own choice still works.
      FW_LOG(Warn, Init, "rank %d: network device %s (%s) is not usable: %s; UCX chooses instead", rank,
             net.ucxDevice.c_str(), net.why.c_str(), created.message().c_str());
      net = NetDeviceChoice{"", "UCX's choice after " + net.ucxDevice + " failed"};
      args.netDevice.clear();
      created = createTransport("ucx", config.pluginPath, args, &inter);
    }
    FW_RETURN_IF_ERROR(created.withContext("inter-node level (FAIRWAY_NET_DEVICES, UCX_TLS, UCX_NET_DEVICES)"));
    std::vector<std::vector<uint8_t>> interAddresses;
    FW_RETURN_IF_ERROR(exchange(oob, size, inter->localAddress(), &interAddresses));
    // Network transports report a dead peer themselves.
    FW_RETURN_IF_ERROR(inter->connect(addressesFor(interAddresses, routes.transportOfPeer, 1),
                                      std::vector<bool>(size, false)));
    routes.transports.push_back(std::move(inter));
    FW_LOG(Info, Init, "rank %d: inter-node network device %s (%s)", rank,
           net.ucxDevice.empty() ? "chosen by UCX" : net.ucxDevice.c_str(), net.why.c_str());
  }

  int ranksOnHost = 0;
  for (bool same : sameHost) ranksOnHost += same ? 1 : 0;
  // The most ranks any communicator of this process has seen on this host:
  // a split (or a node's group) of a few ranks still shares the cores with
  // the job's other processes, so it must yield as the whole job does.
  static std::atomic<int> mostRanksOnHost{0};
  int seen = mostRanksOnHost.load();
  while (seen < ranksOnHost && !mostRanksOnHost.compare_exchange_weak(seen, ranksOnHost)) {}
  const int processesOnHost = std::max(seen, ranksOnHost);
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const bool oversubscribed = cpus > 0 && processesOnHost > cpus;
  auto messenger = std::make_unique<Messenger>(std::move(routes), rank, std::move(peers), config, oversubscribed);
  FW_RETURN_IF_ERROR(messenger->start());
  FW_LOG(Info, Init, "rank %d of %d: node %d of %d (%s), local rank %d of %d, %d ranks on %ld CPUs: idle waits %s",
         rank, size, layout.nodeOf(rank), layout.nodeCount(), layout.describe().c_str(), localRank,
         layout.localSizeOf(rank), processesOnHost, cpus, oversubscribed ? "yield the core" : "keep the core");
  out->reset(new Communicator(config, selector, std::move(messenger), layout, plan, machine, net));
  FW_RETURN_IF_ERROR((*out)->attachSharedMemory());
  // The cost model matters only across nodes.
  if (config.measureLinks && layout.nodeCount() > 1) FW_RETURN_IF_ERROR((*out)->adoptMeasuredLinks());
  return Status::ok();
}

Status Communicator::adoptMeasuredLinks() {
  MeasuredLinks measured;
  FW_RETURN_IF_ERROR(measureLinks(*this, &measured));
  if (measured.intraMeasured && !config_.intraLinkSet) config_.intraLink = measured.intra;
  if (measured.interMeasured && !config_.interLinkSet) config_.interLink = measured.inter;
  selector_.setLinks(config_.intraLink, config_.interLink);
  config_.measureLinks = false;  // communicators split from this one inherit the result
  if (rank() == 0) {
    FW_LOG(Info, Init, "links for the cost model: intra-node %.2f us, %.2f GB/s (%s); inter-node %.2f us, %.2f GB/s (%s)",
           config_.intraLink.alphaUs, config_.intraLink.gbPerSec,
           config_.intraLinkSet ? "FAIRWAY_INTRA_LINK" : (measured.intraMeasured ? "measured" : "default"),
           config_.interLink.alphaUs, config_.interLink.gbPerSec,
           config_.interLinkSet ? "FAIRWAY_INTER_LINK" : (measured.interMeasured ? "measured" : "default"));
  }
  return Status::ok();
}

Communicator::Communicator(const Config& config, const Selector& selector,
                           std::unique_ptr<Messenger> messenger, const RankLayout& layout, const TransportPlan& plan,
                           LocalMachine* machine, const NetDeviceChoice& net)
    : config_(config), selector_(selector), messenger_(std::move(messenger)), layout_(layout), plan_(plan),
      netDevice_(net),
      machine_(machine), pointToPoint_(*messenger_, messenger_->rank(), messenger_->size()) {
  if (selector_.deviceRoutes().present) device_ = std::make_unique<DeviceCollectives>(*this, config_, *machine_);
}

Communicator::~Communicator() {
  executor_.drain();
  device_.reset();
}

MemoryType Communicator::memoryTypeOf(const void* buf) {
  int device = 0;
  if (!device_ || buf == nullptr) return MemoryType::Host;
  return machine_->device->memoryTypeOf(buf, &device);
}

Status Communicator::memoryTypeOf(const CollectiveArgs& args, MemoryType* out) {
  if (!device_) {  // no device memory to tell apart
    *out = MemoryType::Host;
    return Status::ok();
  }
  size_t sendBytes = 0, recvBytes = 0;
  bufferBytes(args, rank(), size(), &sendBytes, &recvBytes);
  if (args.listForm()) return checkListInHostMemory(args, sendBytes > 0 && recvBytes > 0, out);
  MemoryType send = sendBytes > 0 ? memoryTypeOf(args.send) : MemoryType::Host;
  MemoryType recv = recvBytes > 0 ? memoryTypeOf(args.recv) : MemoryType::Host;
  if (sendBytes > 0 && recvBytes > 0 && send != recv) {
    return Status(fwInvalidUsage, std::string("sendbuff is ") + (send == MemoryType::Cuda ? "device" : "host") +
                                      " memory but recvbuff is " + (recv == MemoryType::Cuda ? "device" : "host") +
                                      " memory: one call takes one kind");
  }
  *out = sendBytes > 0 ? send : recv;
  return Status::ok();
}

Status Communicator::checkListInHostMemory(const CollectiveArgs& args, bool anyBytes, MemoryType* out) {
  *out = MemoryType::Host;
  if (!anyBytes) return Status::ok();
  const bool gathers = args.kind == CollectiveKind::AllGather;
  std::vector<const void*> buffers{gathers ? args.send : args.recv};
  if (gathers) buffers.insert(buffers.end(), args.recvBlocks.begin(), args.recvBlocks.end());
  if (!gathers) buffers.insert(buffers.end(), args.sendBlocks.begin(), args.sendBlocks.end());
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (memoryTypeOf(buffers[i]) != MemoryType::Cuda) continue;
    const std::string name = i == 0 ? (gathers ? "sendbuff" : "recvbuff")
                                    : std::string(gathers ? "recvbuffs[" : "sendbuffs[") + std::to_string(i - 1) + "]";
    return Status(fwInvalidUsage, name + " is device memory: the list forms take host buffers (device buffers go "
                                         "in one buffer to the plain call)");
  }
  return Status::ok();
}

Status Communicator::deviceCollective(const CollectiveArgs& args, void* stream) {
  FW_RETURN_IF_ERROR(messenger_->brokenStatus());
  return device_->run(args, stream);
}

Status Communicator::deviceSend(const void* buf, size_t count, fwDataType_t datatype, int peer, void* stream) {
  FW_RETURN_IF_ERROR(messenger_->brokenStatus());
  return device_->send(buf, count, datatype, peer, stream);
}

Status Communicator::deviceRecv(void* buf, size_t count, fwDataType_t datatype, int peer, void* stream) {
  FW_RETURN_IF_ERROR(messenger_->brokenStatus());
  return device_->recv(buf, count, datatype, peer, stream);
}

Status Communicator::asyncError() {
  FW_RETURN_IF_ERROR(messenger_->brokenStatus());
  return device_ ? device_->asyncError() : Status::ok();
}

void Communicator::applyCompressionRules(CollectiveArgs* args) {
  // The list forms have no compressed form.
  if (args->compression.active() || args->listForm() || config_.compressionRules.empty()) return;
  const auto rule = config_.compressionRules.find(collectiveName(args->kind));
  if (rule == config_.compressionRules.end()) return;
  const bool reduces = args->kind != CollectiveKind::AllGather;
  const bool typeFits = args->datatype == fwFloat32 || args->datatype == fwFloat16 || args->datatype == fwBfloat16;
  const bool opFits = !reduces || args->op == fwSum || args->op == fwAvg;
  if (!typeFits || !opFits || selectionBytes(*args, size()) < rule->second.minBytes) return;
  args->compression = rule->second.compression;
  const unsigned bit = 1u << static_cast<unsigned>(args->kind);
  if (rank() == 0 && (compressionLogged_.fetch_or(bit) & bit) == 0) {
    FW_LOG(Info, Algo, "FAIRWAY_COMPRESS: %s calls of %zu bytes and more on float, half or bfloat16 data%s run %s "
           "compressed%s", collectiveName(args->kind), rule->second.minBytes, reduces ? " with sum or avg" : "",
           compressionName(args->compression.kind),
           args->compression.blockwise() ? (" (blocks of " + std::to_string(args->compression.blockSize) + ")").c_str()
                                         : "");
  }
}

Status Communicator::execute(const CollectiveArgs& args, uint32_t sequence, const std::vector<int>& group,
                             const Reserved& how) {
  FW_RETURN_IF_ERROR(messenger_->brokenStatus());
  DataSpace& space = how.space != nullptr ? *how.space : hostSpace_;
  bool reduces = args.kind == CollectiveKind::AllReduce || args.kind == CollectiveKind::ReduceScatter ||
                 args.kind == CollectiveKind::Reduce;
  int groupSize = group.empty() ? size() : static_cast<int>(group.size());
  Reducer reducer(args.datatype, reduces ? args.op : fwSum, groupSize);
  size_t elementSize = args.kind == CollectiveKind::Barrier ? 1 : datatypeSize(args.datatype);
  const PipelineSettings& pipeline = config_.pipeline;
  CollectiveContext ctx(*messenger_, scratch_, space, group, sequence,
                        collectiveSignature(how.whole != nullptr ? *how.whole : args), elementSize,
                        reduces ? &reducer : nullptr, pipeline);
  if (group.empty()) ctx.setLayout(&layout_);
  Algorithm algorithm = how.algorithm;
  if (!how.chosen) {
    algorithm = selector_.select(selectionKeyOf(args, groupSize, group.empty() ? &layout_ : nullptr, false)).algorithm;
  }
  Hierarchy hierarchy = how.hierarchy;
  if (shm_ && group.empty()) {
    shm_->announce(sequence, ctx.signature());
    // Host buffers inside the node go through its segment: a single-node
    // communicator's whole collective, or a hierarchical one's node phase.
    if (hierarchy.node == nullptr && how.space == nullptr) hierarchy.node = shm_.get();
  }
  ctx.setHierarchy(hierarchy);
  Status st;
  try {
    st = runCollective(ctx, args, algorithm);
  } catch (const std::bad_alloc&) {
    st = Status(fwSystemError, "out of memory for scratch buffers");
  }
  if (!st.isOk()) {
    // Nothing may still write into the caller's buffers once we return.
    scratch_.forEachPendingList([&](Pending* list, size_t count) { messenger_->cancel(list, count); });
    messenger_->fail(st);
  }
  // The caller names the collective (the C API, or an internal caller's
  // own context), so the message carries the name once.
  return st;
}

Status Communicator::collective(const CollectiveArgs& args) {
  return executor_.runNow([&] { return execute(args, nextSequence_++, {}, Reserved()); });
}

Status Communicator::startCollective(const CollectiveArgs& args, std::shared_ptr<AsyncOperation>* operation) {
  FW_RETURN_IF_ERROR(messenger_->brokenStatus());
  uint32_t sequence = nextSequence_++;
  *operation = executor_.submit([this, args, sequence] { return execute(args, sequence, {}, Reserved()); });
  return Status::ok();
}

Status Communicator::startReserved(uint32_t collectives, std::function<Status(uint32_t firstSequence)> fn) {
  FW_RETURN_IF_ERROR(messenger_->brokenStatus());
  const uint32_t first = nextSequence_;
  nextSequence_ += collectives;
  executor_.submit([fn = std::move(fn), first] { return fn(first); });
  return Status::ok();
}

Status Communicator::allgatherBytesInGroup(const std::vector<int>& group, uint32_t sequence,
                                           const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>* all) {
  const int n = static_cast<int>(group.size());
  // Lengths first, then every record padded to the longest.
  std::vector<uint64_t> lengths(n);
  uint64_t myLength = mine.size();
  CollectiveArgs args;
  args.kind = CollectiveKind::AllGather;
  args.datatype = fwUint64;
  args.count = 1;
  args.send = &myLength;
  args.recv = lengths.data();
  FW_RETURN_IF_ERROR(execute(args, sequence, group, Reserved()));
  uint64_t longest = *std::max_element(lengths.begin(), lengths.end());
  if (longest > (1u << 24)) return Status(fwInternalError, "peer record of " + std::to_string(longest) + " bytes");
  std::vector<uint8_t> padded(mine);
  padded.resize(longest);
  std::vector<uint8_t> gathered(longest * n);
  args.datatype = fwUint8;
  args.count = longest;
  args.send = padded.data();
  args.recv = gathered.data();
  FW_RETURN_IF_ERROR(execute(args, sequence + 1, group, Reserved()));
  all->resize(n);
  for (int i = 0; i < n; ++i) {
    (*all)[i].assign(gathered.begin() + i * longest, gathered.begin() + i * longest + lengths[i]);
  }
  return Status::ok();
}

Status Communicator::split(int color, int key, std::unique_ptr<Communicator>* out) {
  return executor_.runNow([&]() -> Status {
    // Five collective numbers on every rank, used or not, so all ranks stay
    // in step: the color exchange, then two allgathers for each of the new
    // communicator's (at most two) record exchanges.
    const uint32_t base = nextSequence_;
    nextSequence_ += 5;
    int32_t mine[2] = {color, key};
    std::vector<int32_t> all(2 * size());
    CollectiveArgs args;
    args.kind = CollectiveKind::AllGather;
    args.datatype = fwInt32;
    args.count = 2;
    args.send = mine;
    args.recv = all.data();
    FW_RETURN_IF_ERROR(execute(args, base, {}, Reserved()));
    out->reset();
    if (color == FAIRWAY_SPLIT_NOCOLOR) return Status::ok();

    std::vector<int> members;
    for (int r = 0; r < size(); ++r) if (all[2 * r] == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
    int newRank = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
    uint32_t next = base + 1;
    OobAllgather oob = [&](const std::vector<uint8_t>& record, std::vector<std::vector<uint8_t>>* records) {
      if (next + 2 > base + 5) return Status(fwInternalError, "split: more record exchanges than reserved");
      next += 2;
      return allgatherBytesInGroup(members, next - 2, record, records);
    };
    return Communicator::create(oob, newRank, static_cast<int>(members.size()), config_, out);
  });
}

Status Communicator::destroy() {
  executor_.drain();
  Status st = messenger_->brokenStatus();
  if (st.isOk()) {
    CollectiveArgs barrier;
    st = collective(barrier);
  }
  // After a failure NCCL's enqueued work may never finish: abort it rather
  // than wait for it when the communicator is freed.
  if (!st.isOk() && device_) device_->abort();
  // The device side goes before the connections close: the NCCL
  // communicators of its nodes are torn down collectively, and a peer
  // blocked there would not progress this communicator's transport, whose
  // graceful close waits for every peer (a minute's stall when it did).
  device_.reset();
  messenger_->disconnect();
  return st;
}

void Communicator::abort() {
  if (device_) device_->abort();
  messenger_->fail(Status(fwRemoteError, "rank " + std::to_string(rank()) + " aborted the communicator"));
  executor_.drain();
  messenger_->disconnect();
}

}  // namespace fairway
