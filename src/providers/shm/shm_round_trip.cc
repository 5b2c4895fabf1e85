// Measuring how far apart the cores of a node's two ranks are, at
// creation: the segment's rounds hand cache lines between those cores at
// every step, so the sizes where they beat the kernel's single copy
// depend on that trip (shm_windows.cc).
#include "providers/shm/shm_round_trip.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

#include "p2p/idle_poll.h"
#include "providers/shm/shm_node.h"

namespace fairway {
namespace {

using Clock = std::chrono::steady_clock;

// 16 batches of 16 trips left whole by the scheduler: at 500 ns a trip,
// about 130 us in all where the machine is quiet.
constexpr int kWholeBatches = 16;
constexpr int kTripsPerBatch = 16;
// A trip not back after this many polls (tens of us) found the other side
// not running: on a busy machine the two may share one core, and a spin
// would keep it from the other until the time slice ends.
constexpr unsigned kPollsBeforeYield = 4096;
// The server's last store: this bit on the next trip's number ends the
// measurement on both sides.
constexpr uint32_t kDone = 1u << 31;

// The least batch mean of the whole batches, from each batch's start and
// whether it stayed whole.
class LeastBatch {
 public:
  void start() {
    start_ = Clock::now();
    whole_ = true;
  }
  void spoil() { whole_ = false; }
  void end() {
    if (!whole_) return;
    ++wholeBatches_;
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start_).count() / kTripsPerBatch;
    if (leastNs_ == 0 || ns < leastNs_) leastNs_ = ns;
  }
  int wholeBatches() const { return wholeBatches_; }
  uint32_t answer() const { return leastNs_ == 0 ? 0 : std::max<uint32_t>(1, static_cast<uint32_t>(leastNs_ + 0.5)); }

 private:
  Clock::time_point start_;
  bool whole_ = true;
  int wholeBatches_ = 0;
  double leastNs_ = 0;
};

// Waits until theirs holds `value` (or, for the returner, the end);
// false at the bound. A wait that outlasts the polls spoils the batch
// and yields the core.
bool awaitValue(const std::atomic<uint32_t>& theirs, uint32_t value, bool orDone, Clock::time_point giveUp,
                LeastBatch& batch) {
  unsigned polls = 0;
  for (;;) {
    const uint32_t seen = theirs.load(std::memory_order_acquire);
    if (seen == value || (orDone && (seen & kDone))) return true;
    if (++polls % kPollsBeforeYield != 0) {
      idlePoll(false);
      continue;
    }
    if (Clock::now() >= giveUp) return false;
    batch.spoil();
    sched_yield();
  }
}

}  // namespace

uint32_t handLineRoundTripNs(std::atomic<uint32_t>& mine, const std::atomic<uint32_t>& theirs, bool serves,
                             int boundMs) {
  const Clock::time_point giveUp = Clock::now() + std::chrono::milliseconds(boundMs);
  LeastBatch batch;
  uint32_t value = 0;
  if (serves) {
    // Batches until enough ran whole or the bound passes, then the end.
    while (batch.wholeBatches() < kWholeBatches && Clock::now() < giveUp) {
      batch.start();
      for (int trip = 0; trip < kTripsPerBatch; ++trip) {
        mine.store(++value, std::memory_order_release);
        if (!awaitValue(theirs, value, false, giveUp, batch)) {
          mine.store((value + 1) | kDone, std::memory_order_release);
          return batch.answer();
        }
      }
      batch.end();
    }
    mine.store((value + 1) | kDone, std::memory_order_release);
    return batch.answer();
  }
  // The returner hands each number back until the server's end.
  for (;;) {
    batch.start();
    for (int trip = 0; trip < kTripsPerBatch; ++trip) {
      if (!awaitValue(theirs, value + 1, true, giveUp, batch)) return batch.answer();
      if (theirs.load(std::memory_order_acquire) & kDone) return batch.answer();
      mine.store(++value, std::memory_order_release);
    }
    batch.end();
  }
}

// Local rank 0 serves, local rank 1 returns, on their control blocks'
// probe lines (zero in a new segment).
uint32_t SharedMemoryNode::measureRoundTripNs() {
  if (ranks_ != 2) return 0;
  return handLineRoundTripNs(control(localRank_).probe, control(1 - localRank_).probe, localRank_ == 0,
                             kRoundTripBoundMs);
}

}  // namespace fairway
