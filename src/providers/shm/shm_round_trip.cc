// Measuring how far apart the cores of a node's two ranks are, at
// creation: the segment's rounds hand cache lines between those cores at
// every step, so the sizes where they beat the kernel's single copy
// depend on that trip (shm_windows.cc).
#include "providers/shm/shm_round_trip.h"

#include <algorithm>
#include <chrono>

#include "p2p/idle_poll.h"
#include "providers/shm/shm_node.h"

namespace fairway {
namespace {

// 16 batches of 16 trips: at 500 ns a trip, about 130 us in all. One
// batch in 16 left whole by the scheduler is enough for the least one.
constexpr int kBatches = 16;
constexpr int kTripsPerBatch = 16;

}  // namespace

uint32_t handLineRoundTripNs(std::atomic<uint32_t>& mine, const std::atomic<uint32_t>& theirs, bool serves,
                             int boundMs) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point giveUp = Clock::now() + std::chrono::milliseconds(boundMs);
  uint32_t value = 0;
  double leastNs = 0;
  for (int batch = 0; batch < kBatches; ++batch) {
    const Clock::time_point start = Clock::now();
    for (int trip = 0; trip < kTripsPerBatch; ++trip) {
      ++value;
      if (serves) mine.store(value, std::memory_order_release);
      unsigned polls = 0;
      while (theirs.load(std::memory_order_acquire) != value) {
        if (++polls % 1024 == 0 && Clock::now() >= giveUp) return 0;
        idlePoll(false);
      }
      if (!serves) mine.store(value, std::memory_order_release);
    }
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count() / kTripsPerBatch;
    if (batch == 0 || ns < leastNs) leastNs = ns;
  }
  return std::max<uint32_t>(1, static_cast<uint32_t>(leastNs + 0.5));
}

// Local rank 0 serves, local rank 1 returns, on their control blocks'
// probe lines (zero in a new segment).
uint32_t SharedMemoryNode::measureRoundTripNs() {
  if (ranks_ != 2) return 0;
  return handLineRoundTripNs(control(localRank_).probe, control(1 - localRank_).probe, localRank_ == 0,
                             kRoundTripBoundMs);
}

}  // namespace fairway
