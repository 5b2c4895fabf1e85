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

struct Engine::Message {
  int src = 0, dst = 0;
  size_t bytes = 0;
  uint64_t tag = 0;
  Pending* sendPending = nullptr;
  Pending* recvPending = nullptr;
  uint64_t sendSerial = 0, recvSerial = 0;
  double sendAt = -1, recvAt = -1;
  uint32_t next = kNone;  // the next unmatched message of its key
  uint32_t trace = kNone;
  double workUs = 0;
  bool work = false;  // a rank's work on shared processors, not a message
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
  msg.workUs = processorUs;
  msg.sendPending = &done;
  msg.sendSerial = serial;
  msg.flowStarted = true;
  push(self.clock, EventKind::FlowStart, m);
  (void)waitAll(rank, &done, 1);
}

void Engine::push(double time, EventKind kind, uint32_t a, uint32_t b) {
  events_.push(Event{time, order_++, kind, a, b});
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
  const MatchKey key{isSend ? peer : rank, tag};
  auto it = unmatched_.find(key);
  uint32_t m;
  bool paired = false;
  if (it != unmatched_.end() && (isSend ? !messages_[it->second.first].sendPosted
                                        : !messages_[it->second.first].recvPosted)) {
    // The oldest waiting other end of this key; a send larger than its
    // receive is an algorithm's bug, as a truncated message is in a job.
    m = it->second.first;
    const size_t sent = isSend ? bytes : messages_[m].bytes;
    const size_t room = isSend ? messages_[m].bytes : bytes;
    if (sent > room) {
      out->done = true;
      out->handle = kCompleted;
      return Status(fwInternalError, "simulated rank " + std::to_string(messages_[m].src) + " sent " +
                                         std::to_string(sent) + " bytes to rank " + std::to_string(messages_[m].dst) +
                                         ", whose receive has room for " + std::to_string(room));
    }
    it->second.first = messages_[m].next;
    if (it->second.first == kNone) unmatched_.erase(it);
    paired = true;
  } else {
    m = newMessage();
    Message& msg = messages_[m];
    msg.src = isSend ? rank : peer;
    msg.dst = isSend ? peer : rank;
    msg.tag = tag;
    if (it == unmatched_.end()) {
      unmatched_.emplace(key, std::make_pair(m, m));
    } else {
      messages_[it->second.second].next = m;
      it->second.second = m;
    }
    ++messageCount_;
  }
  Message& msg = messages_[m];
  if (isSend) {
    msg.sendPosted = true;
    msg.sendAt = self.clock;
    msg.sendPending = out;
    msg.sendSerial = serial;
    msg.bytes = bytes;
  } else {
    msg.recvPosted = true;
    msg.recvAt = self.clock;
    msg.recvPending = out;
    msg.recvSerial = serial;
    if (!msg.sendPosted) msg.bytes = bytes;
  }
  if (isSend && !paired && bytes <= spec_.eagerBytes) {
    // Eager: on its way before its receive is posted.
    msg.flowStarted = true;
    push(msg.sendAt, EventKind::FlowStart, m);
  }
  if (paired) matched(m);
  return Status::ok();
}

// Both ends are posted.
void Engine::matched(uint32_t m) {
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
    msg.flowStarted = true;
    push(std::max(msg.sendAt, now_), EventKind::FlowStart, m);
    return;
  }
  // A rendezvous: the receiver learns of the send, then pulls the data.
  const Path path = fabric_.path(msg.src, msg.dst);
  msg.flowStarted = true;
  push(std::max({msg.sendAt, msg.recvAt, now_}) + path.latencyUs, EventKind::FlowStart, m);
}

void Engine::startFlow(uint32_t m) {
  Message& msg = messages_[m];
  if (msg.work) {
    int links[3];
    int hops = 0;
    links[hops++] = rankProcessor_[msg.src];
    if (!nodeProcessors_.empty()) links[hops++] = nodeProcessors_[fabric_.nodeOf(msg.src)];
    if (clusterProcessors_ >= 0) links[hops++] = clusterProcessors_;
    network_.start(links, hops, msg.workUs, now_, m);
    return;
  }
  const Path path = fabric_.path(msg.src, msg.dst);
  if (tracing_) {
    msg.trace = static_cast<uint32_t>(trace_.size());
    TraceRecord t;
    t.src = msg.src;
    t.dst = msg.dst;
    t.bytes = msg.bytes;
    t.tag = msg.tag;
    t.sendPosted = msg.sendAt;
    t.recvPosted = msg.recvAt;
    t.flowStart = now_;
    for (int h = 0; h < path.hops; ++h) t.path += std::string(h ? " > " : "") + network_.kind(path.links[h]);
    trace_.push_back(std::move(t));
  }
  if (msg.bytes == 0) {
    push(now_, EventKind::FlowEnd, m);
    return;
  }
  network_.start(path.links, path.hops, static_cast<double>(msg.bytes), now_, m);
}

void Engine::complete(int rank, Pending* p, uint64_t serial) {
  // A slot the algorithm reused after abandoning the operation is left alone.
  if (p == nullptr || p->handle != handleOf(serial)) return;
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
  if (msg.trace != kNone) trace_[msg.trace].flowEnd = now_;
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
      startFlow(e.a);
      return;
    case EventKind::FlowEnd:
      flowEnded(e.a);
      return;
    case EventKind::Deliver: {
      Message& msg = messages_[e.a];
      msg.delivered = true;
      if (msg.trace != kNone) trace_[msg.trace].delivered = now_;
      if (!msg.senderDone) {
        complete(msg.src, msg.sendPending, msg.sendSerial);
        msg.senderDone = true;
      }
      if (msg.recvPosted) {
        complete(msg.dst, msg.recvPending, msg.recvSerial);
        msg.receiverDone = true;
      }
      if (msg.senderDone && msg.receiverDone) releaseMessage(e.a);
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
    network_.settle(now_);
    const double nextFlow = network_.nextFinish();
    if (events_.empty() && nextFlow == std::numeric_limits<double>::infinity()) break;
    now_ = events_.empty() ? nextFlow : std::min(nextFlow, events_.top().time);
    while (network_.nextFinish() == now_) {
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
