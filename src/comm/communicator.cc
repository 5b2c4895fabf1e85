#include "comm/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "comm/run_collective.h"
#include "comm/tags.h"
#include "comm/transport_loader.h"
#include "core/datatype.h"
#include "core/log.h"

namespace fairway {

Status Communicator::create(const OobAllgather& oob, int rank, int size, const Config& config,
                            std::unique_ptr<Communicator>* out) {
  AlgorithmSelector selector;
  FW_RETURN_IF_ERROR(AlgorithmSelector::create(config.algoOverrides, &selector));

  // Host memory has one transport today; "auto" resolves to it.
  const std::string transportName = "ucx";
  TransportInitArgs args;
  args.rank = rank;
  args.size = size;
  args.timeoutMs = config.timeoutMs;
  std::unique_ptr<Transport> transport;
  FW_RETURN_IF_ERROR(createTransport(transportName, config.pluginPath, args, &transport));

  PeerInfo mine = PeerInfo::forThisProcess(config.nodeId);
  mine.transportAddress = transport->localAddress();
  std::vector<std::vector<uint8_t>> records;
  FW_RETURN_IF_ERROR(oob(mine.encode(), &records));
  if (static_cast<int>(records.size()) != size) {
    return Status(fwInternalError, "out-of-band exchange returned " + std::to_string(records.size()) + " records for " +
                                       std::to_string(size) + " ranks");
  }
  std::vector<PeerInfo> peers(size);
  std::vector<std::vector<uint8_t>> addresses(size);
  std::vector<std::string> nodeOfRank(size);
  std::vector<bool> sameHost(size);
  for (int r = 0; r < size; ++r) {
    FW_RETURN_IF_ERROR(PeerInfo::decode(records[r], &peers[r]).withContext("record of rank " + std::to_string(r)));
    addresses[r] = peers[r].transportAddress;
    nodeOfRank[r] = peers[r].nodeId;
    sameHost[r] = mine.sharesProcessSpaceWith(peers[r]);
  }
  FW_RETURN_IF_ERROR(transport->connect(addresses, sameHost));

  NodeLayout layout = computeNodeLayout(nodeOfRank, rank);
  int ranksOnHost = 0;
  for (bool same : sameHost) ranksOnHost += same ? 1 : 0;
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const bool oversubscribed = cpus > 0 && ranksOnHost > cpus;
  auto messenger = std::make_unique<Messenger>(std::move(transport), rank, std::move(peers), config, oversubscribed);
  FW_RETURN_IF_ERROR(messenger->start());
  FW_LOG(Info, Init, "rank %d of %d: node %d of %d, local rank %d of %d, transport %s, %d ranks on %ld CPUs: idle "
         "waits %s", rank, size, layout.nodeIndex, layout.nodeCount, layout.localRank, layout.localSize,
         transportName.c_str(), ranksOnHost, cpus, oversubscribed ? "yield the core" : "keep the core");
  out->reset(new Communicator(config, selector, std::move(messenger)));
  return Status::ok();
}

Communicator::Communicator(const Config& config, const AlgorithmSelector& selector,
                           std::unique_ptr<Messenger> messenger)
    : config_(config), selector_(selector), messenger_(std::move(messenger)),
      sentTo_(messenger_->size(), 0), receivedFrom_(messenger_->size(), 0) {}

Communicator::~Communicator() { executor_.drain(); }

Status Communicator::execute(const CollectiveArgs& args, uint32_t sequence, const std::vector<int>& group) {
  FW_RETURN_IF_ERROR(messenger_->brokenStatus());
  bool reduces = args.kind == CollectiveKind::AllReduce || args.kind == CollectiveKind::ReduceScatter ||
                 args.kind == CollectiveKind::Reduce;
  int groupSize = group.empty() ? size() : static_cast<int>(group.size());
  Reducer reducer(args.datatype, reduces ? args.op : fwSum, groupSize);
  size_t elementSize = args.kind == CollectiveKind::Barrier ? 1 : datatypeSize(args.datatype);
  PipelineSettings pipeline{config_.segmentBytes, config_.pipelineDepth};
  CollectiveContext ctx(*messenger_, scratch_, group, sequence, collectiveSignature(args), elementSize,
                        reduces ? &reducer : nullptr, pipeline);
  Status st;
  try {
    st = runCollective(ctx, args, selector_);
  } catch (const std::bad_alloc&) {
    st = Status(fwSystemError, "out of memory for scratch buffers");
  }
  if (!st.isOk()) {
    // Nothing may still write into the caller's buffers once we return.
    size_t count = 0;
    Pending* inFlight = scratch_.allPendings(&count);
    messenger_->cancel(inFlight, count);
    messenger_->fail(st);
    return st.withContext(collectiveName(args.kind));
  }
  return st;
}

Status Communicator::collective(const CollectiveArgs& args) {
  return executor_.runNow([&] { return execute(args, nextSequence_++, {}); });
}

Status Communicator::startCollective(const CollectiveArgs& args, std::shared_ptr<AsyncOperation>* operation) {
  FW_RETURN_IF_ERROR(messenger_->brokenStatus());
  uint32_t sequence = nextSequence_++;
  *operation = executor_.submit([this, args, sequence] { return execute(args, sequence, {}); });
  return Status::ok();
}

Status Communicator::postSend(const void* buf, size_t bytes, int peer, Pending* out) {
  std::lock_guard<std::mutex> lock(pointToPointMutex_);
  return messenger_->send(peer, buf, bytes, Tag::pointToPoint(rank(), sentTo_[peer]++), out);
}

Status Communicator::postRecv(void* buf, size_t bytes, int peer, Pending* out) {
  std::lock_guard<std::mutex> lock(pointToPointMutex_);
  return messenger_->recv(peer, buf, bytes, Tag::pointToPoint(peer, receivedFrom_[peer]++), out);
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
  FW_RETURN_IF_ERROR(execute(args, sequence, group));
  uint64_t longest = *std::max_element(lengths.begin(), lengths.end());
  if (longest > (1u << 24)) return Status(fwInternalError, "peer record of " + std::to_string(longest) + " bytes");
  std::vector<uint8_t> padded(mine);
  padded.resize(longest);
  std::vector<uint8_t> gathered(longest * n);
  args.datatype = fwUint8;
  args.count = longest;
  args.send = padded.data();
  args.recv = gathered.data();
  FW_RETURN_IF_ERROR(execute(args, sequence + 1, group));
  all->resize(n);
  for (int i = 0; i < n; ++i) {
    (*all)[i].assign(gathered.begin() + i * longest, gathered.begin() + i * longest + lengths[i]);
  }
  return Status::ok();
}

Status Communicator::split(int color, int key, std::unique_ptr<Communicator>* out) {
  return executor_.runNow([&]() -> Status {
    // Three collective numbers on every rank, used or not, so all ranks
    // stay in step: the color exchange and the new group's two allgathers.
    const uint32_t base = nextSequence_;
    nextSequence_ += 3;
    int32_t mine[2] = {color, key};
    std::vector<int32_t> all(2 * size());
    CollectiveArgs args;
    args.kind = CollectiveKind::AllGather;
    args.datatype = fwInt32;
    args.count = 2;
    args.send = mine;
    args.recv = all.data();
    FW_RETURN_IF_ERROR(execute(args, base, {}));
    out->reset();
    if (color == FAIRWAY_SPLIT_NOCOLOR) return Status::ok();

    std::vector<int> members;
    for (int r = 0; r < size(); ++r) if (all[2 * r] == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
    int newRank = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
    OobAllgather oob = [&](const std::vector<uint8_t>& record, std::vector<std::vector<uint8_t>>* records) {
      return allgatherBytesInGroup(members, base + 1, record, records);
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
  messenger_->disconnect();
  return st;
}

void Communicator::abort() {
  messenger_->fail(Status(fwRemoteError, "rank " + std::to_string(rank()) + " aborted the communicator"));
  executor_.drain();
  messenger_->disconnect();
}

}  // namespace fairway
