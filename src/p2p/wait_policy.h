// How a rank waiting for its peers spends the wait: spinning while the wait
// is likely to end soon and nothing else wants the core, then giving the
// core back (the caller blocks: in poll on the transports' event fds, or
// on a futex in the node's shared memory). Shared by the Messenger's waits
// on the transports and the shared-memory provider's waits on the segment;
// one policy per communicator (its messenger's), so its history is that
// communicator's.
//
// FAIRWAY_WAIT=adaptive (the default) decides per wait:
//  - How long to spin (the budget): four times the typical wait of this
//    communicator (a moving average of the waits that outlasted their
//    first polls, each counted up to FAIRWAY_SPIN_US), at least kMinSpin;
//    but only kMinSpin when waits typically last more than a quarter of
//    FAIRWAY_SPIN_US (a peer computing between calls, a slow link): such a
//    wait is not likely to end within the window, and waking then costs
//    little next to it.
//  - Whether the core is wanted: a spinning thread that the scheduler
//    preempted (an involuntary context switch of its own, or a gap between
//    two looks at the clock) stops spinning at once, and for 20 ms
//    afterwards every wait in the process spins at most kMinSpin before it
//    sleeps: another thread of the job (a training step's compute, a data
//    loader) or another process was ready to run there. With a CPU per
//    rank its polls do not yield: sched_yield would hand the core to that
//    thread for the rest of its time slice (milliseconds), where a sleeper
//    its peer wakes preempts it at once. (With more ranks than CPUs every
//    poll yields, contended or not: below.)
//  - When the host runs more ranks than CPUs, every wait yields the core
//    between polls for up to FAIRWAY_SPIN_US: the ranks hand each other
//    the cores through their yields, where sleeping would cost each
//    hand-off a wake-up (8 ranks on 2 cores: a 2 ms window halved
//    allreduce times at 16-256 KiB against a 20 us one). There the ranks
//    preempt each other all the time, so only a long gap between two
//    looks (a yield that handed the core to a thread that kept it for its
//    time slice: a busy process, a rank computing) counts as contention,
//    after which waits spin briefly, still yielding, and sleep.
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
  // A gap this long between two looks at the clock means the spinning
  // thread was not running (preempted, or its virtual CPU was).
  static constexpr std::chrono::microseconds kPreemptionGap{500};

  // oversubscribed: this host runs more ranks than it has CPUs.
  WaitPolicy(WaitMode mode, int64_t spinMicros, bool oversubscribed,
             ContentionWatch& contention = ContentionWatch::process());

  // What a wait that has begun to read the clock spins for. Its empty
  // polls yield the core exactly when the host is oversubscribed.
  Clock::duration spinBudget(Clock::time_point now) const;
  // A wait that read the clock ended, after `waited` from its first look.
  void record(Clock::duration waited);
  // A spinning thread was preempted at now: the cores are wanted.
  void sawContention(Clock::time_point now) { contention_.saw(now); }
  bool oversubscribed() const { return oversubscribed_; }
  // What a spinning wait takes as a sign of contention (the adaptive
  // policy only): a gap between two looks at the clock, and (with a CPU
  // per rank) an involuntary context switch.
  bool watchesGaps() const { return mode_ == WaitMode::Adaptive; }
  bool watchesSwitches() const { return mode_ == WaitMode::Adaptive && !oversubscribed_; }

 private:
  WaitMode mode_;
  Clock::duration maxSpin_;
  bool oversubscribed_;
  ContentionWatch& contention_;
  // The typical wait (ns): a moving average, weight 1/8 for the newest,
  // updated without a lock (a lost update only blurs a heuristic).
  std::atomic<int64_t> typicalNs_;
};

// One wait's spinning, for the loops that poll: idle() between empty polls,
// keepSpinning(now) at each look at the clock (false: block now, and from
// then on false until the wait ends or restarts), and ended() when the
// awaited event came. A wait that ends before it first
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
  void restart() { ended(); }

 private:
  WaitPolicy& policy_;
  bool started_ = false;
  bool stopped_ = false;  // spinning is over for this wait (it blocks from now on)
  bool gapsCount_ = false;  // a gap between looks means preemption (watched)
  unsigned looks_ = 0;
  long switches_ = 0;
  WaitPolicy::Clock::time_point start_{};
  WaitPolicy::Clock::time_point lastLook_{};
  WaitPolicy::Clock::duration budget_{};
};

}  // namespace fairway
