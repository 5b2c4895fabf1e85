// The communicator's flight record as dumps and the live query see it,
// and the dumps a failure, a revoke or an abort writes.
#include <signal.h>

#include "algorithms/algorithm.h"
#include "comm/communicator.h"
#include "core/log.h"
#include "core/provider.h"

namespace fairway {

namespace {

// This rank's input and output elements as torch's records give tensor
// sizes: a rooted collective's buffers count on every rank.
void elementsOf(const TraceEntry& e, int size, uint64_t* in, uint64_t* out) {
  const uint64_t one = e.count, all = e.count * static_cast<uint64_t>(size);
  *in = *out = one;
  if (!e.isCollective()) return;
  switch (static_cast<CollectiveKind>(e.kind)) {
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::Scatter: *in = all; break;
    case CollectiveKind::AllGather:
    case CollectiveKind::Gather: *out = all; break;
    case CollectiveKind::AllToAll: *in = *out = all; break;
    case CollectiveKind::AllToAllv:
    case CollectiveKind::Barrier: *in = *out = 0; break;
    default: break;
  }
}

}  // namespace

void Communicator::startTracing() {
  globalRanks_.resize(size());
  for (int r = 0; r < size(); ++r) globalRanks_[r] = r;
  registerTraceSource(this);
  if (config_.traceDir.empty() || config_.traceSignal == "none") return;
  const int signo = config_.traceSignal == "USR2" ? SIGUSR2 : SIGUSR1;
  const Status armed = armTraceSignal(signo, config_.traceDir);
  if (!armed.isOk()) FW_LOG(Warn, Init, "FAIRWAY_TRACE_SIGNAL: %s", armed.message().c_str());
}

void Communicator::nameTraceOfChild(Communicator* child, const std::string& desc,
                                    const std::vector<int>& members) const {
  child->traceDesc_ = desc;
  child->globalRanks_.clear();
  for (int member : members) child->globalRanks_.push_back(globalRanks_[member]);
}

TraceEntry Communicator::traceEntryOf(const CollectiveArgs& args, uint32_t sequence, uint8_t memory,
                                      void* stream) const {
  TraceEntry e;
  e.sequence = sequence;
  e.kind = static_cast<uint8_t>(args.kind);
  e.datatype = static_cast<uint8_t>(args.datatype);
  e.op = static_cast<uint8_t>(args.op);
  e.memory = memory;
  const bool rooted = args.kind == CollectiveKind::Broadcast || args.kind == CollectiveKind::Reduce ||
                      args.kind == CollectiveKind::Gather || args.kind == CollectiveKind::Scatter;
  e.rootOrPeer = rooted ? args.root : -1;
  e.count = args.count;
  e.stream = reinterpret_cast<uint64_t>(stream);
  return e;
}

uint64_t Communicator::traceMessage(bool isSend, int peer, size_t count, fwDataType_t datatype, void* stream) {
  TraceEntry e;
  e.sequence = messagesTraced_++;
  e.kind = static_cast<uint8_t>(isSend ? TracedKind::Send : TracedKind::Recv);
  e.datatype = static_cast<uint8_t>(datatype);
  e.memory = stream != nullptr ? 1 : 0;
  e.rootOrPeer = peer;
  e.count = count;
  e.stream = reinterpret_cast<uint64_t>(stream);
  e.callerSequence = callerSequence_;
  callerSequence_ = 0;
  const uint64_t id = record_.post(e);
  record_.started(id, FlightRecord::kNoPlan, 0, /*atPost=*/true);
  return id;
}

void Communicator::traceEnded(uint64_t id, const Status& result, size_t bytes) {
  record_.ended(id, result, bytes >= FlightRecord::kTimedBytes);
}

TraceEntry Communicator::callerEntryOf(const CollectiveArgs& args, uint32_t sequence, uint8_t memory, void* stream) {
  TraceEntry e = traceEntryOf(args, sequence, memory, stream);
  e.callerSequence = callerSequence_;
  callerSequence_ = 0;
  return e;
}

CommunicatorTrace Communicator::traceSnapshot() {
  CommunicatorTrace c;
  c.name = traceName_;
  c.desc = traceDesc_;
  c.globalRanks = globalRanks_;
  c.rank = rank();
  c.size = size();
  c.timeoutMs = config_.timeoutMs;
  c.broken = messenger_->brokenStatus().message();
  c.failedRanks = messenger_->failedRanks();
  c.posted = record_.posted();
  const Messenger::WaitNote waiting = messenger_->waitNote();
  c.waitingOn = waiting.peer;
  c.waitingSinceNs = waiting.sinceNs;
  c.entries = record_.snapshot();
  c.failures = record_.failureMessages();
  for (TraceEntry& e : c.entries) {
    elementsOf(e, size(), &e.inElements, &e.outElements);
    if (!e.chosen) continue;
    c.algorithmNames[e.recordId] = algorithmName(static_cast<Algorithm>(e.algorithm));
    c.providerNames[e.recordId] = providerName(static_cast<Provider>(e.provider));
  }
  return c;
}

Status Communicator::dumpTrace(const std::string& dir, const std::string& reason, std::string* path) {
  return dumpTraces(dir.empty() ? config_.traceDir : dir, reason, path);
}

void Communicator::dumpOnFailure(const std::string& reason) {
  if (config_.traceDir.empty() || failureDumped_.exchange(true)) return;
  std::string path;
  const Status st = dumpTraces(config_.traceDir, reason, &path);
  if (st.isOk()) {
    FW_LOG(Warn, Coll, "rank %d: %s: trace dump written to %s", rank(), reason.c_str(), path.c_str());
  } else {
    FW_LOG(Warn, Coll, "rank %d: %s: no trace dump: %s", rank(), reason.c_str(), st.message().c_str());
  }
}

}  // namespace fairway
