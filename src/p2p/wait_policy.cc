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
      typicalNs_(std::chrono::nanoseconds(kMinSpin).count() / 4) {}

WaitPolicy::Clock::duration WaitPolicy::spinBudget(Clock::time_point now) const {
  if (mode_ == WaitMode::Spin) return maxSpin_;
  // Contended: spin briefly, then sleep; a sleeper its peer wakes preempts
  // the thread that wanted the core.
  if (contention_.wanted(now)) return std::min<Clock::duration>(kMinSpin, maxSpin_);
  // The ranks hand each other the cores through their yields; sleeping
  // would cost a wake-up each time instead.
  if (oversubscribed_) return maxSpin_;
  const auto typical = std::chrono::nanoseconds(typicalNs_.load(std::memory_order_relaxed));
  if (4 * typical > maxSpin_) return std::min<Clock::duration>(kMinSpin, maxSpin_);
  return std::min<Clock::duration>(std::max<Clock::duration>(4 * typical, kMinSpin), maxSpin_);
}

void WaitPolicy::record(Clock::duration waited) {
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::min(waited, maxSpin_)).count();
  const int64_t typical = typicalNs_.load(std::memory_order_relaxed);
  typicalNs_.store(typical + (ns - typical) / 8, std::memory_order_relaxed);
}

void SpinningWait::idle() const { idlePoll(policy_.oversubscribed()); }

bool SpinningWait::keepSpinning(WaitPolicy::Clock::time_point now) {
  if (stopped_) return false;
  if (!started_) {
    started_ = true;
    start_ = lastLook_ = now;
    looks_ = 0;
    budget_ = policy_.spinBudget(now);
    const bool spinning = budget_ > WaitPolicy::Clock::duration::zero();
    // Oversubscribed, the ranks preempt each other all the time: only a
    // long gap (a yield that handed the core to a thread that kept it for
    // a time slice) tells that something else wants the cores.
    switches_ = spinning && policy_.watchesSwitches() ? involuntarySwitches() : -1;
    gapsCount_ = spinning && policy_.watchesGaps();
    stopped_ = !spinning;
    return spinning;
  }
  const bool gap = now - lastLook_ >= WaitPolicy::kPreemptionGap;
  lastLook_ = now;
  if ((gap && gapsCount_) ||
      (++looks_ % kLooksPerSwitchCheck == 0 && switches_ >= 0 && involuntarySwitches() != switches_)) {
    policy_.sawContention(now);  // preempted while spinning: give the core back
    stopped_ = true;
  } else if (now - start_ >= budget_) {
    stopped_ = true;
  }
  return !stopped_;
}

void SpinningWait::ended() {
  if (!started_) return;
  policy_.record(WaitPolicy::Clock::now() - start_);
  started_ = false;
  stopped_ = false;
}

}  // namespace fairway
