#include "p2p/wait_policy.h"

#include <sys/resource.h>

#include <algorithm>

#include "p2p/idle_poll.h"

namespace fairway {

namespace {

int64_t nanosOf(WaitPolicy::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// The calling thread's involuntary context switches so far (-1 if unknown).
long involuntarySwitches() {
  rusage usage{};
  if (getrusage(RUSAGE_THREAD, &usage) != 0) return -1;
  return usage.ru_nivcsw;
}

// Looks at the clock between two readings of the switch count: a few tens
// of microseconds of spinning, so a preempted spinner notices soon and a
// spinning one pays a system call only now and then.
constexpr unsigned kLooksPerSwitchCheck = 8;

}  // namespace

ContentionWatch& ContentionWatch::process() {
  static ContentionWatch watch;
  return watch;
}

void ContentionWatch::saw(Clock::time_point now) {
  const int64_t until = nanosOf(now + kContendedFor);
  int64_t seen = untilNs_.load(std::memory_order_relaxed);
  while (seen < until && !untilNs_.compare_exchange_weak(seen, until, std::memory_order_relaxed)) {
  }
}

bool ContentionWatch::wanted(Clock::time_point now) const {
  return nanosOf(now) < untilNs_.load(std::memory_order_relaxed);
}

WaitPolicy::WaitPolicy(WaitMode mode, int64_t spinMicros, bool oversubscribed, ContentionWatch& contention)
    : mode_(mode),
      maxSpin_(std::chrono::microseconds(std::max<int64_t>(0, spinMicros))),
      oversubscribed_(oversubscribed),
      contention_(contention),
      shortMeanNs_(std::chrono::nanoseconds(kMinSpin).count() / 4) {}

WaitPolicy::Clock::duration WaitPolicy::spinBudget(Clock::time_point now, bool* yield) const {
  if (mode_ == WaitMode::Spin) {
    *yield = oversubscribed_;
    return maxSpin_;
  }
  const bool contended = contention_.wanted(now);
  *yield = oversubscribed_ || contended;
  Clock::duration budget = kMinSpin;
  if (!contended && shortShare_.load(std::memory_order_relaxed) >= kScale / 2) {
    const auto typical = std::chrono::nanoseconds(shortMeanNs_.load(std::memory_order_relaxed));
    budget = std::clamp<Clock::duration>(4 * typical, kMinSpin, kShortWait);
  }
  return std::min(budget, maxSpin_);
}

void WaitPolicy::record(Clock::duration waited) {
  const bool isShort = waited <= kShortWait;
  const int64_t share = shortShare_.load(std::memory_order_relaxed);
  shortShare_.store(share + ((isShort ? kScale : 0) - share) / 8, std::memory_order_relaxed);
  if (isShort) {
    const int64_t mean = shortMeanNs_.load(std::memory_order_relaxed);
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(waited).count();
    shortMeanNs_.store(mean + (ns - mean) / 8, std::memory_order_relaxed);
  }
}

void SpinningWait::idle() const { idlePoll(yield_ || policy_.oversubscribed()); }

bool SpinningWait::keepSpinning(WaitPolicy::Clock::time_point now) {
  if (!started_) {
    started_ = true;
    start_ = lastLook_ = now;
    looks_ = 0;
    budget_ = policy_.spinBudget(now, &yield_);
    switches_ = budget_ > WaitPolicy::Clock::duration::zero() ? involuntarySwitches() : -1;
    return now - start_ < budget_;
  }
  const bool gap = now - lastLook_ >= WaitPolicy::kPreemptionGap;
  lastLook_ = now;
  if (now - start_ >= budget_) return false;
  if (gap || (++looks_ % kLooksPerSwitchCheck == 0 && switches_ >= 0 && involuntarySwitches() != switches_)) {
    policy_.sawContention(now);  // preempted while spinning: give the core back
    budget_ = WaitPolicy::Clock::duration::zero();
    return false;
  }
  return true;
}

void SpinningWait::ended() {
  if (!started_) return;
  policy_.record(WaitPolicy::Clock::now() - start_);
  started_ = false;
}

}  // namespace fairway
