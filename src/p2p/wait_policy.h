// How a rank waiting for its peers spends the wait: spinning while the wait
// is likely to end soon and nothing else wants the core, then giving the
// core back (the caller blocks: in poll on the transports' event fds, or
// on a futex in the node's shared memory). Shared by the Messenger's waits
// on the transports and the shared-memory provider's waits on the segment;
// one policy per communicator (its messenger's), so its history is that
// communicator's.
//
// FAIRWAY_WAIT=adaptive (the default) decides per wait:
//  - How long to spin (the budget): while most waits that outlast the
//    first polls have ended within kShortWait, four times their typical
//    length (at least kMinSpin, at most kShortWait); otherwise, when waits
//    are mostly long (a peer computing, a slow link), only kMinSpin: then
//    waking costs little next to the wait.
//  - Whether the core is wanted: a spinning thread that the scheduler
//    preempted (an involuntary context switch of its own, or a gap between
//    two looks at the clock) stops spinning at once, and for 20 ms
//    afterwards every wait in the process spins at most kMinSpin, yielding
//    the core between polls: another thread of the job (a training step's
//    compute, a data loader) or another process was ready to run there.
//  - When the host runs more ranks than CPUs, empty polls always yield.
// FAIRWAY_WAIT=spin, for ranks that each own a core: every wait spins for
// FAIRWAY_SPIN_US before blocking, whatever else wants the core.
// FAIRWAY_SPIN_US caps the spin either way (0: block at once).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace fairway {

enum class WaitMode { Adaptive, Spin };

// Whether the cores are wanted by other threads or processes: set when a
// spinning thread finds it was preempted, remembered for kContendedFor.
// One per process (process()), as every thread of the job shares the cores.
class ContentionWatch {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kContendedFor{20};

  static ContentionWatch& process();
  void saw(Clock::time_point now);
  bool wanted(Clock::time_point now) const;

 private:
  std::atomic<int64_t> untilNs_{0};  // steady clock, ns since its epoch
};

class WaitPolicy {
 public:
  using Clock = std::chrono::steady_clock;

  static constexpr std::chrono::microseconds kMinSpin{50};
  static constexpr std::chrono::microseconds kShortWait{200};
  // A gap this long between two looks at the clock means the spinning
  // thread was not running (preempted, or its virtual CPU was).
  static constexpr std::chrono::microseconds kPreemptionGap{500};

  // oversubscribed: this host runs more ranks than it has CPUs.
  WaitPolicy(WaitMode mode, int64_t spinMicros, bool oversubscribed,
             ContentionWatch& contention = ContentionWatch::process());

  // What a wait that has begun to read the clock spins for, and whether
  // its empty polls yield the core.
  Clock::duration spinBudget(Clock::time_point now, bool* yield) const;
  // A wait that read the clock ended, after `waited` from its first look.
  void record(Clock::duration waited);
  // A spinning thread was preempted at now: the cores are wanted.
  void sawContention(Clock::time_point now) { contention_.saw(now); }
  bool oversubscribed() const { return oversubscribed_; }

 private:
  WaitMode mode_;
  Clock::duration maxSpin_;
  bool oversubscribed_;
  ContentionWatch& contention_;
  // Of the waits recorded, the share (out of kScale) that ended within
  // kShortWait, and the typical length of those (ns); moving averages with
  // weight 1/8 for the newest, updated without a lock (a lost update only
  // blurs a heuristic).
  static constexpr int64_t kScale = 1024;
  std::atomic<int64_t> shortShare_{kScale};
  std::atomic<int64_t> shortMeanNs_;
};

// One wait's spinning, for the loops that poll: idle() between empty polls,
// keepSpinning(now) at each look at the clock (false: block now), and
// ended() when the awaited event came. A wait that ends before it first
// looks at the clock costs nothing here.
class SpinningWait {
 public:
  explicit SpinningWait(WaitPolicy& policy) : policy_(policy) {}
  ~SpinningWait() { ended(); }

  void idle() const;
  bool keepSpinning(WaitPolicy::Clock::time_point now);
  // Records the wait (once) with the policy, if it looked at the clock.
  void ended();
  // Progress was made (a wait on several operations saw one complete): the
  // rest is a new wait.
  void restart() {
    ended();
    started_ = false;
  }

 private:
  WaitPolicy& policy_;
  bool started_ = false;
  bool yield_ = false;
  unsigned looks_ = 0;
  long switches_ = 0;
  WaitPolicy::Clock::time_point start_{};
  WaitPolicy::Clock::time_point lastLook_{};
  WaitPolicy::Clock::duration budget_{};
};

}  // namespace fairway
