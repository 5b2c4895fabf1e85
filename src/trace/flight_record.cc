#include "trace/flight_record.h"

#include <sched.h>
#include <time.h>

namespace fairway {

namespace {

bool terminal(TraceState state) {
  return state == TraceState::Completed || state == TraceState::Failed || state == TraceState::Enqueued;
}

}  // namespace

const char* traceStateName(TraceState state) {
  switch (state) {
    case TraceState::Posted: return "posted";
    case TraceState::Enqueued: return "enqueued";
    case TraceState::Started: return "started";
    case TraceState::Completed: return "completed";
    case TraceState::Failed: return "failed";
  }
  return "unknown";
}

std::string tracedKindName(uint8_t kind) {
  if (kind < kCollectiveKinds) return collectiveName(static_cast<CollectiveKind>(kind));
  if (kind == static_cast<uint8_t>(TracedKind::Send)) return "send";
  if (kind == static_cast<uint8_t>(TracedKind::Recv)) return "recv";
  return "unknown";
}

uint64_t traceSecondNs() { return static_cast<uint64_t>(time(nullptr)) * 1000000000u; }

uint64_t traceClockNs() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME_COARSE, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
}

// Every field an atomic, written relaxed (plain stores on x86) inside the
// slot's sequence count: odd while a writer is changing the slot.
struct FlightRecord::Slot {
  std::atomic<uint32_t> version{0};
  std::atomic<uint64_t> recordId{kNone};
  std::atomic<uint64_t> sequence{0}, callerSequence{0}, count{0}, stream{0};
  std::atomic<uint64_t> postedNs{0}, startedNs{0}, endedNs{0};
  // kind, datatype, op, memory, state, algorithm, provider, chosen: a byte each.
  std::atomic<uint64_t> bytes{0};
  std::atomic<int32_t> rootOrPeer{-1}, result{0};

  static uint64_t pack(const TraceEntry& e) {
    const uint8_t b[8] = {e.kind, e.datatype, e.op, e.memory, static_cast<uint8_t>(e.state), e.algorithm,
                          e.provider, static_cast<uint8_t>(e.chosen)};
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
    return v;
  }
  static void unpack(uint64_t v, TraceEntry* e) {
    e->kind = v & 0xff;
    e->datatype = (v >> 8) & 0xff;
    e->op = (v >> 16) & 0xff;
    e->memory = (v >> 24) & 0xff;
    e->state = static_cast<TraceState>((v >> 32) & 0xff);
    e->algorithm = (v >> 40) & 0xff;
    e->provider = (v >> 48) & 0xff;
    e->chosen = ((v >> 56) & 0xff) != 0;
  }
  static uint64_t withState(uint64_t v, TraceState state) {
    return (v & ~(uint64_t{0xff} << 32)) | (uint64_t{static_cast<uint8_t>(state)} << 32);
  }

  void beginWrite() {
    version.store(version.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  void endWrite() { version.store(version.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
};

FlightRecord::FlightRecord(size_t capacity)
    : capacity_(capacity), slots_(capacity > 0 ? new Slot[capacity] : nullptr) {}

FlightRecord::~FlightRecord() = default;

uint64_t FlightRecord::post(const TraceEntry& what) {
  if (capacity_ == 0) return kNone;
  const uint64_t id = nextId_.load(std::memory_order_relaxed);
  Slot& slot = slots_[id % capacity_];
  // A slot is reused only once its operation has ended: its runner then
  // never writes it again. An operation still running a whole ring later
  // keeps its slot, and the new one goes unrecorded (counted).
  if (slot.recordId.load(std::memory_order_relaxed) != kNone) {
    TraceEntry old;
    Slot::unpack(slot.bytes.load(std::memory_order_acquire), &old);
    if (!terminal(old.state)) {
      nextId_.store(id + 1, std::memory_order_release);
      return kNone;
    }
  }
  TraceEntry e = what;
  e.state = TraceState::Posted;
  e.chosen = false;
  slot.beginWrite();
  slot.recordId.store(id, std::memory_order_relaxed);
  slot.sequence.store(e.sequence, std::memory_order_relaxed);
  slot.callerSequence.store(e.callerSequence, std::memory_order_relaxed);
  slot.count.store(e.count, std::memory_order_relaxed);
  slot.stream.store(e.stream, std::memory_order_relaxed);
  slot.postedNs.store(traceSecondNs(), std::memory_order_relaxed);
  slot.startedNs.store(0, std::memory_order_relaxed);
  slot.endedNs.store(0, std::memory_order_relaxed);
  slot.rootOrPeer.store(e.rootOrPeer, std::memory_order_relaxed);
  slot.result.store(0, std::memory_order_relaxed);
  slot.bytes.store(Slot::pack(e), std::memory_order_relaxed);
  slot.endWrite();
  nextId_.store(id + 1, std::memory_order_release);
  return id;
}

template <typename Change>
void FlightRecord::update(uint64_t id, Change&& change) {
  if (id == kNone || capacity_ == 0) return;
  Slot& slot = slots_[id % capacity_];
  if (slot.recordId.load(std::memory_order_relaxed) != id) return;
  slot.beginWrite();
  change(slot);
  slot.endWrite();
}

void FlightRecord::started(uint64_t id, uint8_t algorithm, uint8_t provider, bool atPost) {
  update(id, [&](Slot& slot) {
    TraceEntry e;
    Slot::unpack(slot.bytes.load(std::memory_order_relaxed), &e);
    e.state = TraceState::Started;
    e.algorithm = algorithm;
    e.provider = provider;
    e.chosen = algorithm != kNoPlan;
    slot.startedNs.store(atPost ? slot.postedNs.load(std::memory_order_relaxed) : traceSecondNs(),
                         std::memory_order_relaxed);
    slot.bytes.store(Slot::pack(e), std::memory_order_relaxed);
  });
}

void FlightRecord::enqueued(uint64_t id) {
  update(id, [&](Slot& slot) {
    slot.startedNs.store(traceSecondNs(), std::memory_order_relaxed);
    slot.bytes.store(Slot::withState(slot.bytes.load(std::memory_order_relaxed), TraceState::Enqueued),
                     std::memory_order_release);
  });
}

void FlightRecord::ended(uint64_t id, const Status& result, bool timed) {
  if (id == kNone || capacity_ == 0) return;
  if (!result.isOk()) {
    std::lock_guard<std::mutex> lock(failuresMutex_);
    failures_[id] = result.message();
    const uint64_t next = nextId_.load(std::memory_order_acquire);
    const uint64_t oldest = next > capacity_ ? next - capacity_ : 0;
    while (!failures_.empty() && failures_.begin()->first < oldest) failures_.erase(failures_.begin());
  }
  update(id, [&](Slot& slot) {
    slot.endedNs.store(!result.isOk() ? traceClockNs() : (timed ? traceSecondNs() : 0), std::memory_order_relaxed);
    slot.result.store(result.code(), std::memory_order_relaxed);
    slot.bytes.store(Slot::withState(slot.bytes.load(std::memory_order_relaxed),
                                     result.isOk() ? TraceState::Completed : TraceState::Failed),
                     std::memory_order_release);
  });
}

std::vector<TraceEntry> FlightRecord::snapshot() const {
  std::vector<TraceEntry> out;
  if (capacity_ == 0) return out;
  const uint64_t next = nextId_.load(std::memory_order_acquire);
  const uint64_t first = next > capacity_ ? next - capacity_ : 0;
  out.reserve(next - first);
  for (uint64_t id = first; id < next; ++id) {
    const Slot& slot = slots_[id % capacity_];
    for (;;) {
      const uint32_t before = slot.version.load(std::memory_order_acquire);
      if (before & 1) {  // a writer is inside; it leaves within a few stores
        sched_yield();
        continue;
      }
      TraceEntry e;
      e.recordId = slot.recordId.load(std::memory_order_relaxed);
      e.sequence = slot.sequence.load(std::memory_order_relaxed);
      e.callerSequence = slot.callerSequence.load(std::memory_order_relaxed);
      e.count = slot.count.load(std::memory_order_relaxed);
      e.stream = slot.stream.load(std::memory_order_relaxed);
      e.postedNs = slot.postedNs.load(std::memory_order_relaxed);
      e.startedNs = slot.startedNs.load(std::memory_order_relaxed);
      e.endedNs = slot.endedNs.load(std::memory_order_relaxed);
      e.rootOrPeer = slot.rootOrPeer.load(std::memory_order_relaxed);
      e.result = slot.result.load(std::memory_order_relaxed);
      Slot::unpack(slot.bytes.load(std::memory_order_relaxed), &e);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (slot.version.load(std::memory_order_relaxed) != before) continue;
      if (e.recordId == id) out.push_back(e);  // else: unrecorded (kept an older op's slot), or not yet written
      break;
    }
  }
  return out;
}

std::map<uint64_t, std::string> FlightRecord::failureMessages() const {
  std::lock_guard<std::mutex> lock(failuresMutex_);
  return failures_;
}

}  // namespace fairway
