#include "comm/communicator.h"

#include <algorithm>

#include "algorithms/dispatch.h"
#include "collective/operations.h"
#include "comm/link_probe.h"
#include "core/datatype.h"
#include "core/log.h"
#include "p2p/tags.h"

namespace fairway {

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
      machine_(machine), pointToPoint_(*messenger_, messenger_->rank(), messenger_->size()),
      record_(static_cast<size_t>(config.traceEntries)) {
  if (selector_.deviceRoutes().present) {
    device_ = std::make_unique<DeviceCollectives>(*this, config_, *machine_, record_);
  }
  startTracing();
}

Communicator::~Communicator() {
  unregisterTraceSource(this);
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
  // Device calls are numbered when the worker takes them (startReserved):
  // the entry shows the number that call will get.
  const uint64_t trace = record_.post(callerEntryOf(args, nextSequence_, 1, stream));
  Status st = device_->run(args, stream, trace);
  if (!st.isOk()) record_.ended(trace, st);
  return st;
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
  const uint64_t trace = how.traceId != FlightRecord::kNone
                             ? how.traceId
                             : record_.post(traceEntryOf(args, sequence, how.providers.buffers != nullptr, nullptr));
  if (Status broken = messenger_->brokenStatus(); !broken.isOk()) {
    record_.ended(trace, broken);
    return broken;
  }
  const bool reduces = operationRow(args.kind).reduces;
  int groupSize = group.empty() ? size() : static_cast<int>(group.size());
  Reducer reducer(args.datatype, reduces ? args.op : fwSum, groupSize);
  size_t elementSize = args.kind == CollectiveKind::Barrier ? 1 : datatypeSize(args.datatype);
  const Selection plan = how.chosen ? how.selection
                                    : selections_.select(selectionKeyOf(args, groupSize,
                                                                        group.empty() ? &layout_ : nullptr, false));
  record_.started(trace, static_cast<uint8_t>(plan.algorithm), static_cast<uint8_t>(plan.node), how.startsAtPost);
  // A host call has host memory and, over the whole communicator, the node's segment.
  PlanProviders providers = how.providers;
  if (providers.buffers == nullptr) {
    providers.buffers = &hostSpace_;
    if (group.empty()) providers.segment = shm_.get();
  }
  BoundPlan bound;
  if (Status st = bindPlan(plan, providers, &bound); !st.isOk()) {
    record_.ended(trace, st);
    return st;
  }
  CollectiveContext ctx(*messenger_, scratch_, *bound.space, group, sequence, collectiveSignature(args), elementSize,
                        reduces ? &reducer : nullptr, *plan.pipeline);
  if (group.empty()) ctx.setLayout(&layout_);
  if (shm_ && group.empty()) shm_->announce(sequence, ctx.signature());
  ctx.setHierarchy(bound.hierarchy);
  ctx.setWire(bound.wire);
  Status st;
  try {
    st = runCollective(ctx, args, plan.algorithm);
  } catch (const std::bad_alloc&) {
    st = Status(fwSystemError, "out of memory for scratch buffers");
  }
  if (st.isOk() && bound.wire != nullptr) st = bound.wire->finish(true);
  if (!st.isOk()) {
    // Nothing may still write into the caller's buffers (or the wire's) once we return.
    scratch_.forEachPendingList([&](Pending* list, size_t count) { messenger_->cancel(list, count); });
    if (bound.wire != nullptr) (void)bound.wire->finish(false);  // reports nothing once the call failed
    messenger_->fail(st);
    record_.ended(trace, st);
    dumpOnFailure(st.code() == fwTimeout ? "timeout" : "failure");
    return st;
  }
  // A blocking call under 64 KiB that started when posted records no end
  // time (FlightRecord::ended): it is over in microseconds.
  record_.ended(trace, st, !how.startsAtPost || args.count * elementSize >= FlightRecord::kTimedBytes);
  // The caller names the collective (the C API, or an internal caller's
  // own context), so the message carries the name once.
  return st;
}

Status Communicator::collective(const CollectiveArgs& args) {
  Reserved how;
  const uint32_t sequence = nextSequence_++;
  how.traceId = record_.post(callerEntryOf(args, sequence, 0, nullptr));
  how.startsAtPost = executor_.idle();  // else it waits for earlier calls first: its start is read then
  return executor_.runNow([&] { return execute(args, sequence, {}, how); });
}

Status Communicator::startCollective(const CollectiveArgs& args, std::shared_ptr<AsyncOperation>* operation) {
  FW_RETURN_IF_ERROR(messenger_->brokenStatus());
  uint32_t sequence = nextSequence_++;
  const uint64_t trace = record_.post(callerEntryOf(args, sequence, 0, nullptr));
  *operation = executor_.submit([this, args, sequence, trace] {
    Reserved how;
    how.traceId = trace;
    return execute(args, sequence, {}, how);
  });
  return Status::ok();
}

Status Communicator::startReserved(uint32_t collectives, std::function<Status(uint32_t firstSequence)> fn) {
  FW_RETURN_IF_ERROR(messenger_->brokenStatus());
  const uint32_t first = nextSequence_;
  nextSequence_ += collectives;
  executor_.submit([fn = std::move(fn), first] { return fn(first); }, /*callerMayWait=*/false);
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
    FW_RETURN_IF_ERROR(Communicator::create(oob, newRank, static_cast<int>(members.size()), config_, out));
    nameTraceOfChild(out->get(), "split", members);
    return Status::ok();
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

void Communicator::revoke() {
  messenger_->revoke(Status(fwRevoked, "rank " + std::to_string(rank()) + " revoked the communicator"));
  if (device_) device_->abort();
  dumpOnFailure("revoke");
}

void Communicator::abort() {
  // A failure this rank saw on its device path (NCCL's asynchronous error)
  // goes with the notice: a peer that has not seen it yet (its idle thread
  // reads the notice at once) learns the cause, not only the abort.
  const Status seen = device_ ? device_->asyncError() : Status::ok();
  if (device_) device_->abort();
  std::string why = "rank " + std::to_string(rank()) + " aborted the communicator";
  if (!seen.isOk()) why += " after: " + seen.message();
  messenger_->fail(Status(fwRemoteError, why));
  dumpOnFailure("abort");
  executor_.drain();
  messenger_->disconnect();
}

}  // namespace fairway
