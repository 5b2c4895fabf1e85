// A communicator's flight record: a fixed ring of its last N operations
// (FAIRWAY_TRACE_ENTRIES), each with what was called, what the plan chose,
// and when it was posted, started and ended. It is cheap enough to leave
// on: one thread posts (the caller; a communicator's calls are made in
// order), one runs (the caller or the executor's worker), and nothing on
// that path takes a lock or allocates. A reader (a dump, the live status
// query) copies entries under a per-slot sequence count and retries a slot
// a writer was changing.
//
// Times are real time, comparable between the ranks' dumps. On the path
// of every call they are whole seconds (time(), under a nanosecond to
// read: the 1-4 ms coarse clock cost 4 ns, 13% of a 1-rank 8-byte
// allreduce): enough to say that a call has waited for a minute, or was
// posted seconds after its peers'. A failure's end is read from the
// coarse clock, so the job's first failure can be told from the next.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collective/collective_args.h"
#include "core/status.h"

namespace fairway {

// What an entry records beside the collectives: messages between two ranks.
enum class TracedKind : uint8_t {
  // 0..kCollectiveKinds-1 are CollectiveKind values.
  Send = 32,
  Recv = 33,
};

enum class TraceState : uint8_t {
  Posted,     // called, waiting behind earlier calls
  Enqueued,   // handed to a device stream (NCCL's own collective): its end is the stream's
  Started,    // running: messages and waits under way
  Completed,
  Failed,
};
const char* traceStateName(TraceState state);

// One operation as a reader sees it: a consistent copy of its slot.
struct TraceEntry {
  uint64_t recordId = 0;   // this communicator's operations, counted from 0
  uint64_t sequence = 0;   // the collective number every rank gives it (p2p: its own count)
  uint64_t callerSequence = 0;  // the caller's own number for it (torch's sequence number), 0: none
  uint8_t kind = 0;        // CollectiveKind or TracedKind
  uint8_t datatype = 0;    // fwDataType_t
  uint8_t op = 0;          // fwRedOp_t
  uint8_t memory = 0;      // 0 host, 1 device
  TraceState state = TraceState::Posted;
  uint8_t algorithm = 0;   // the plan's Algorithm, set when started
  uint8_t provider = 0;    // the plan's node Provider
  bool chosen = false;     // algorithm and provider are set
  int32_t rootOrPeer = -1; // root of a rooted collective, peer of a message, else -1
  int32_t result = 0;      // fwResult_t of a failed one
  uint64_t count = 0;      // as the API took it
  uint64_t inElements = 0, outElements = 0;  // this rank's input and output
  uint64_t stream = 0;     // the device stream, 0 for host calls
  uint64_t postedNs = 0, startedNs = 0, endedNs = 0;  // real time, 0 where not reached
  bool isCollective() const { return kind < 32; }
};

// The operation's name as the dumps write it ("allreduce", "send").
std::string tracedKindName(uint8_t kind);

// The coarse real-time clock (1-4 ms steps), and whole seconds; ns since the epoch.
uint64_t traceClockNs();
uint64_t traceSecondNs();

class FlightRecord {
 public:
  // capacity 0: records nothing (every call is a no-op returning kNone).
  explicit FlightRecord(size_t capacity);
  ~FlightRecord();
  static constexpr uint64_t kNone = ~uint64_t{0};

  bool enabled() const { return capacity_ > 0; }
  size_t capacity() const { return capacity_; }

  // Records a new operation as posted; returns its record id.
  uint64_t post(const TraceEntry& what);
  // started's algorithm for an operation without a plan (a message).
  static constexpr uint8_t kNoPlan = 0xff;
  // The plan chose algorithm (and provider) and the call runs. atPost: it
  // runs the moment it was posted (a blocking call nothing queued before),
  // so the post's time stands for its start and the clock is not read.
  void started(uint64_t id, uint8_t algorithm, uint8_t provider, bool atPost = false);
  void enqueued(uint64_t id);
  // Ends the operation: completed, or failed with result. A success that
  // is not timed records no end time: the clock read would cost a
  // 1-rank 8-byte allreduce 2%, and a short call's end is its start.
  void ended(uint64_t id, const Status& result, bool timed = true);
  // Blocking calls of fewer bytes that start when posted are not timed.
  static constexpr size_t kTimedBytes = 64 << 10;

  // The entries still in the ring, oldest first.
  std::vector<TraceEntry> snapshot() const;
  // Failure messages of entries still in the ring, by record id.
  std::map<uint64_t, std::string> failureMessages() const;
  // The record id the next post gets (how many were ever posted).
  uint64_t posted() const { return nextId_.load(std::memory_order_acquire); }

 private:
  struct Slot;
  // Runs change on the slot holding id, unless the ring has moved past it.
  template <typename Change>
  void update(uint64_t id, Change&& change);

  size_t capacity_;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<uint64_t> nextId_{0};
  mutable std::mutex failuresMutex_;     // failures only: never on a successful call's path
  std::map<uint64_t, std::string> failures_;
};

}  // namespace fairway
