#include "sim/engine.h"

#include <boost/context/fiber.hpp>
#include <boost/context/fixedsize_stack.hpp>
#include <chrono>
#include <limits>
#include <new>

#include "sim/sim_rank.h"

namespace fairway::sim {

namespace ctx = boost::context;

namespace {
constexpr uint32_t kNone = ~uint32_t{0};
// Enough for the deepest algorithm (a compressed two-phase call inside
// dispatch); pages are touched only as the stack grows.
constexpr size_t kFiberStackBytes = 256 * 1024;
constexpr double kSameInstantUs = 1e-6;

RequestHandle handleOf(uint64_t serial) { return reinterpret_cast<RequestHandle>(static_cast<uintptr_t>(serial)); }
}  // namespace

struct Engine::Rank {
  Rank(Engine& engine, int rank) : port(engine, rank), space(engine, rank) {}
  SimPort port;
  SimDataSpace space;
  ctx::fiber fiber;  // the rank's code, suspended
  ctx::fiber sink;   // the scheduler, while the rank runs
  double clock = 0;
  // The wait it is suspended in: [waitBegin, waitEnd) with `outstanding` not done.
  Pending* waitBegin = nullptr;
  Pending* waitEnd = nullptr;
  size_t outstanding = 0;
  bool waiting = false;
  bool finished = false;
  Status result;
};

// 72 bytes: a two-phase call on 16,384 ranks has 33 million at once.
struct Engine::Message {
  int src = 0, dst = 0;
  size_t bytes = 0;
  uint64_t tag = 0;
  Pending* sendPending = nullptr;
  Pending* recvPending = nullptr;
  // When its first end was posted (the second's time comes to matched());
  // for a rank's work on shared processors, the processor-us it takes.
  double firstAt = 0;
  // The low bits of each post's serial, as its Pending's handle holds it:
  // a slot the algorithm reused for another post is left alone.
  uint32_t sendSerial = 0, recvSerial = 0;
  uint32_t next = kNone;  // the next unmatched message of its key
  bool work = false;      // a rank's work on shared processors, not a message
  bool sendPosted = false, recvPosted = false;
  bool flowStarted = false;
  bool delivered = false;  // the data is at the receiver
  bool senderDone = false, receiverDone = false;
};

Engine::Engine(const ClusterSpec& spec, int nodes)
    : spec_(spec), nodes_(nodes), ranks_(nodes * spec.ranksPerNode), fabric_(spec_, nodes, &network_) {
  rankStates_.reserve(ranks_);
  for (int r = 0; r < ranks_; ++r) rankStates_.push_back(std::make_unique<Rank>(*this, r));
  sharedProcessors_ = spec.coresPerNode > 0 || spec.coresInCluster > 0;
  if (sharedProcessors_) {
    for (int r = 0; r < ranks_; ++r) rankProcessor_.push_back(network_.addLink(1, 0, "rank's processor"));
    if (spec.coresPerNode > 0) {
      for (int m = 0; m < nodes; ++m) nodeProcessors_.push_back(network_.addLink(spec.coresPerNode, 0, "node's cores"));
    }
    if (spec.coresInCluster > 0) clusterProcessors_ = network_.addLink(spec.coresInCluster, 0, "cluster's cores");
  }
}

Engine::~Engine() = default;

void Engine::charge(int rank, double us) { rankStates_[rank]->clock += us; }

void Engine::work(int rank, double processorUs) {
  Rank& self = *rankStates_[rank];
  if (!sharedProcessors_ || processorUs <= 0) {
    self.clock += processorUs;
    return;
  }
  Pending done;
  const uint64_t serial = ++serial_;
  done.handle = handleOf(serial);
  done.done = false;
  const uint32_t m = newMessage();
  Message& msg = messages_[m];
  msg.src = msg.dst = rank;
  msg.work = true;
  msg.firstAt = processorUs;
  msg.sendPending = &done;
  msg.sendSerial = static_cast<uint32_t>(serial);
  msg.flowStarted = true;
  push(self.clock, EventKind::FlowStart, m);
  (void)waitAll(rank, &done, 1);
}

void Engine::push(double time, EventKind kind, uint32_t message) {
  events_.push(Event{time, order_++, message, kind});
}

uint32_t Engine::newMessage() {
  if (!freeMessages_.empty()) {
    const uint32_t m = freeMessages_.back();
    freeMessages_.pop_back();
    messages_[m] = Message{};
    return m;
  }
  messages_.emplace_back();
  return static_cast<uint32_t>(messages_.size() - 1);
}

void Engine::releaseMessage(uint32_t m) { freeMessages_.push_back(m); }

Status Engine::post(int rank, bool isSend, int peer, size_t bytes, uint64_t tag, Pending* out) {
  if (peer < 0 || peer >= ranks_) {
    return Status(fwInternalError, "simulated rank " + std::to_string(rank) + " addressed rank " +
                                       std::to_string(peer) + " of " + std::to_string(ranks_));
  }
  Rank& self = *rankStates_[rank];
  const uint64_t serial = ++serial_;
  *out = Pending{};
  out->handle = handleOf(serial);
  out->peer = peer;
  out->tag = tag;
  out->isRecv = !isSend;
  out->done = false;
  const int receiver = isSend ? peer : rank;
  MatchTable::Entry* waiting = unmatched_.find(receiver, tag);
  uint32_t m;
  bool paired = false;
  if (waiting != nullptr && (isSend ? !messages_[waiting->first].sendPosted : !messages_[waiting->first].recvPosted)) {
    // The oldest waiting other end of this key; a send larger than its
    // receive is an algorithm's bug, as a truncated message is in a job.
    m = waiting->first;
    const size_t sent = isSend ? bytes : messages_[m].bytes;
    const size_t room = isSend ? messages_[m].bytes : bytes;
    if (sent > room) {
      out->done = true;
      out->handle = kCompleted;
      return Status(fwInternalError, "simulated rank " + std::to_string(messages_[m].src) + " sent " +
                                         std::to_string(sent) + " bytes to rank " + std::to_string(messages_[m].dst) +
                                         ", whose receive has room for " + std::to_string(room));
    }
    waiting->first = messages_[m].next;
    if (waiting->first == kNone) unmatched_.erase(waiting);
    paired = true;
  } else {
    m = newMessage();
    Message& msg = messages_[m];
    msg.src = isSend ? rank : peer;
    msg.dst = receiver;
    msg.tag = tag;
    msg.firstAt = self.clock;
    if (waiting == nullptr) {
      unmatched_.insert(receiver, tag, m);
    } else {
      messages_[waiting->last].next = m;
      waiting->last = m;
    }
    ++messageCount_;
  }
  Message& msg = messages_[m];
  if (tracing_) {
    if (traceIndex_.size() <= m) {
      traceIndex_.resize(m + 1, kNone);
      tracePosted_.resize(m + 1);
    }
    if (!paired) traceIndex_[m] = kNone;
    (isSend ? tracePosted_[m].first : tracePosted_[m].second) = self.clock;
  }
  if (isSend) {
    msg.sendPosted = true;
    msg.sendPending = out;
    msg.sendSerial = static_cast<uint32_t>(serial);
    msg.bytes = bytes;
  } else {
    msg.recvPosted = true;
    msg.recvPending = out;
    msg.recvSerial = static_cast<uint32_t>(serial);
    if (!msg.sendPosted) msg.bytes = bytes;
  }
  if (isSend && !paired && bytes <= spec_.eagerBytes) {
    // Eager: on its way before its receive is posted.
    msg.flowStarted = true;
    push(self.clock, EventKind::FlowStart, m);
  }
  if (paired) matched(m, self.clock);
  return Status::ok();
}

void Engine::matched(uint32_t m, double secondAt) {
  Message& msg = messages_[m];
  if (msg.flowStarted) {
    // An eager message: its receive completes once the data is there.
    if (msg.delivered) {
      complete(msg.dst, msg.recvPending, msg.recvSerial);
      msg.receiverDone = true;
    }
    if (msg.senderDone && msg.receiverDone) releaseMessage(m);
    return;
  }
  if (msg.bytes <= spec_.eagerBytes) {
    // An eager send not yet on its way was posted second (a first one
    // starts at once), so secondAt is its time.
    msg.flowStarted = true;
    push(std::max(secondAt, now_), EventKind::FlowStart, m);
    return;
  }
  // A rendezvous: the receiver learns of the send, then pulls the data.
  const Path path = fabric_.path(msg.src, msg.dst);
  msg.flowStarted = true;
  push(std::max({msg.firstAt, secondAt, now_}) + path.latencyUs, EventKind::FlowStart, m);
}

void Engine::startFlow(uint32_t m) {
  Message& msg = messages_[m];
  if (msg.work) {
    int links[3];
    int hops = 0;
    links[hops++] = rankProcessor_[msg.src];
    if (!nodeProcessors_.empty()) links[hops++] = nodeProcessors_[fabric_.nodeOf(msg.src)];
    if (clusterProcessors_ >= 0) links[hops++] = clusterProcessors_;
    network_.start(links, hops, msg.firstAt, m);
    return;
  }
  const Path path = fabric_.path(msg.src, msg.dst);
  if (tracing_) {
    traceIndex_[m] = static_cast<uint32_t>(trace_.size());
    TraceRecord t;
    t.src = msg.src;
    t.dst = msg.dst;
    t.bytes = msg.bytes;
    t.tag = msg.tag;
    t.sendPosted = tracePosted_[m].first;
    t.recvPosted = tracePosted_[m].second;
    t.flowStart = now_;
    for (int h = 0; h < path.hops; ++h) t.path += std::string(h ? " > " : "") + network_.kind(path.links[h]);
    trace_.push_back(std::move(t));
  }
  if (msg.bytes == 0) {
    push(now_, EventKind::FlowEnd, m);
    return;
  }
  network_.start(path.links, path.hops, static_cast<double>(msg.bytes), m);
}

void Engine::complete(int rank, Pending* p, uint32_t serial) {
  // A slot the algorithm reused after abandoning the operation is left alone.
  if (p == nullptr || p->handle == kCompleted ||
      static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p->handle)) != serial) {
    return;
  }
  p->done = true;
  p->handle = kCompleted;
  Rank& r = *rankStates_[rank];
  if (r.waiting && p >= r.waitBegin && p < r.waitEnd && --r.outstanding == 0) {
    r.waiting = false;
    runnable_.push_back(rank);
  }
}

// A message's bytes have all left (or it had none): its sender may be
// done, and it arrives after its path's latency and the overhead.
void Engine::flowEnded(uint32_t m) {
  Message& msg = messages_[m];
  if (msg.work) {
    complete(msg.src, msg.sendPending, msg.sendSerial);
    releaseMessage(m);
    return;
  }
  const Path path = fabric_.path(msg.src, msg.dst);
  const double arrive = now_ + path.latencyUs + spec_.messageOverheadUs;
  if (tracing_ && traceIndex_[m] != kNone) trace_[traceIndex_[m]].flowEnd = now_;
  // An eager send is done once its data has left; a rendezvous send
  // when the receiver has it.
  if (msg.bytes <= spec_.eagerBytes) {
    complete(msg.src, msg.sendPending, msg.sendSerial);
    msg.senderDone = true;
  }
  push(arrive, EventKind::Deliver, m);
}

void Engine::process(const Event& e) {
  ++eventCount_;
  switch (e.kind) {
    case EventKind::FlowStart:
      startFlow(e.message);
      return;
    case EventKind::FlowEnd:
      flowEnded(e.message);
      return;
    case EventKind::Deliver: {
      Message& msg = messages_[e.message];
      msg.delivered = true;
      if (tracing_ && traceIndex_[e.message] != kNone) trace_[traceIndex_[e.message]].delivered = now_;
      if (!msg.senderDone) {
        complete(msg.src, msg.sendPending, msg.sendSerial);
        msg.senderDone = true;
      }
      if (msg.recvPosted) {
        complete(msg.dst, msg.recvPending, msg.recvSerial);
        msg.receiverDone = true;
      }
      if (msg.senderDone && msg.receiverDone) releaseMessage(e.message);
      return;
    }
  }
}

Status Engine::waitAll(int rank, Pending* list, size_t count) {
  Rank& r = *rankStates_[rank];
  size_t open = 0;
  for (size_t i = 0; i < count; ++i) open += list[i].done ? 0 : 1;
  if (open == 0) return Status::ok();
  r.waitBegin = list;
  r.waitEnd = list + count;
  r.outstanding = open;
  r.waiting = true;
  r.sink = std::move(r.sink).resume();  // back to the scheduler until the last completes
  r.clock = std::max(r.clock, now_);
  return Status::ok();
}

void Engine::resumeRunnable() {
  while (!runnable_.empty()) {
    const int r = runnable_.back();
    runnable_.pop_back();
    Rank& rank = *rankStates_[r];
    rank.fiber = std::move(rank.fiber).resume();
  }
}

Status Engine::run(const Body& body, RunStats* stats) {
  // Clocks, messages and the network carry over from a run: one per engine.
  if (ran_) return Status(fwInvalidUsage, "a simulation engine runs once; make another for the next call");
  ran_ = true;
  const auto wallStart = std::chrono::steady_clock::now();
  trace_.clear();
  for (int r = 0; r < ranks_; ++r) {
    Rank& rank = *rankStates_[r];
    rank.fiber = ctx::fiber(std::allocator_arg, ctx::fixedsize_stack(kFiberStackBytes),
                            [this, r, &body, &rank](ctx::fiber&& sink) {
                              rank.sink = std::move(sink);
                              try {
                                rank.result = body(r, rank.port, rank.space);
                              } catch (const std::bad_alloc&) {
                                rank.result = Status(fwSystemError, "out of memory in simulated rank " +
                                                                        std::to_string(r));
                              }
                              rank.finished = true;
                              return std::move(rank.sink);
                            });
  }
  // Rank 0 runs first, as the stack pops from the back.
  for (int r = ranks_ - 1; r >= 0; --r) runnable_.push_back(r);
  for (;;) {
    resumeRunnable();
    if (network_.unsettled()) {
      // Large sets of flows wait for the quantum; small ones never do.
      const bool due = now_ >= nextSettle_;
      network_.settle(now_, due);
      if (due) nextSettle_ = now_ + rateQuantumUs_;
    }
    double next = network_.nextFinish();
    if (!events_.empty()) next = std::min(next, events_.top().time);
    if (network_.unsettled()) next = std::min(next, nextSettle_);  // flows wait for their rates
    if (next == std::numeric_limits<double>::infinity()) break;
    now_ = std::max(now_, next);
    // Flows that end within a picosecond of each other end together:
    // symmetric flows' finish times differ only in rounding, and each
    // distinct instant would work out the rates of their component again.
    while (network_.nextFinish() <= now_ + kSameInstantUs) {
      const int flow = network_.nextFlow();
      const uint32_t m = network_.owner(flow);
      network_.finish(flow);
      ++eventCount_;
      flowEnded(m);
    }
    while (!events_.empty() && events_.top().time == now_) {
      const Event e = events_.top();
      events_.pop();
      process(e);
    }
  }
  RunStats s;
  s.events = eventCount_;
  s.messages = messageCount_;
  s.flows = network_.flowsStarted();
  s.largestComponent = network_.largestComponent();
  s.settles = network_.settles();
  s.flowsSettled = network_.flowsSettled();
  s.wallSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wallStart).count();
  Status firstError;
  std::string stuck;
  int stuckCount = 0;
  s.firstFinishUs = -1;
  for (int r = 0; r < ranks_; ++r) {
    Rank& rank = *rankStates_[r];
    if (!rank.finished) {
      if (++stuckCount <= 8) stuck += (stuck.empty() ? "" : ", ") + std::to_string(r);
      continue;
    }
    if (!rank.result.isOk() && firstError.isOk()) firstError = rank.result;
    s.finishUs = std::max(s.finishUs, rank.clock);
    s.firstFinishUs = s.firstFinishUs < 0 ? rank.clock : std::min(s.firstFinishUs, rank.clock);
  }
  if (stats != nullptr) *stats = s;
  FW_RETURN_IF_ERROR(firstError);
  if (stuckCount > 0) {
    return Status(fwInternalError, std::to_string(stuckCount) + " simulated ranks wait for messages no rank sends " +
                                       "(ranks " + stuck + (stuckCount > 8 ? ", ..." : "") + ")");
  }
  return Status::ok();
}

}  // namespace fairway::sim
