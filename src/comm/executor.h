// Runs a communicator's collectives one at a time, in call order. Blocking
// calls run on the caller's thread once earlier non-blocking ones are done;
// non-blocking calls queue for a worker thread that starts on first use and
// sleeps while the queue is empty.
//
// A queued job that nothing has started is run by whoever needs it first:
// the worker, a caller waiting for it (AsyncOperation::wait), or a blocking
// call or drain that must come after it. A caller that waits for a
// non-blocking call soon after making it (a small call through torch with
// async_op=True) then runs it itself, with no hand-off to the worker and
// back.
//
// How a post gets the worker going depends on what its callers do. A
// lazy post does not wake the worker: it rings a doorbell, a thread at the
// lowest scheduling class (SCHED_IDLE) that wakes the worker for a job
// nobody has claimed within kWaiterGrace. Waking a thread of normal
// priority at every post costs the poster the wake-up and puts a thread
// on a core the job's ranks are using, preempting one of them (2-rank
// 8 B-32 KiB async_op=True allreduce through torch, waited for at once,
// unpinned on 2 cores: 16-27 us with the worker woken at every post,
// 10-17 with lazy posts; blocking 8-15). Posts are lazy while their
// callers claim them; after a lazy post the worker had to run, the next
// posts wake the worker at once (kWakingPostsAfterAMiss, doubling with
// each miss in a row): the doorbell's class gets a core late when other
// processes keep every core busy (a peer's allreduce waited a median
// 7-13 ms instead of 3-4 for a rank computing 20 ms beside two busy
// processes with every post lazy), and a job nobody waits for at once
// (DDP's buckets, overlapping the backward pass) must start at once. The
// worker keeps normal priority: a SCHED_IDLE thread running a collective
// would starve, and could not leave that class without CAP_SYS_NICE.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/status.h"

namespace fairway {

class Executor;

// The completion side of a queued operation.
class AsyncOperation {
 public:
  bool isDone();
  // Blocks until done (the operation's own waits are bounded) and returns
  // its result. An operation nothing has started yet is run here, after
  // the ones queued before it.
  Status wait();
  void complete(Status result);
  // Runs fn(result) once the operation is done: on the thread that
  // completes it, after waiters are woken, or now if it is done already.
  void whenDone(std::function<void(const Status&)> fn);

 private:
  friend class Executor;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  Status result_;
  std::vector<std::function<void(const Status&)>> whenDone_;
  // Set by submit; used only while the operation is not done, when its
  // executor is alive (the communicator drains before it goes).
  Executor* executor_ = nullptr;
};

class Executor {
 public:
  ~Executor();

  // Runs fn on this thread after everything queued before it. With
  // nothing queued, running or waiting (every blocking call of a program
  // that makes no non-blocking ones), one atomic claim and one release
  // stand for the lock's two rounds and notifications.
  template <typename F>
  Status runNow(F&& fn) {
    uint32_t idle = 0;
    if (state_.compare_exchange_strong(idle, kRunning, std::memory_order_acquire, std::memory_order_relaxed)) {
      Status result = fn();
      uint32_t running = kRunning;
      if (!state_.compare_exchange_strong(running, 0, std::memory_order_release, std::memory_order_relaxed)) {
        endRun();  // work was queued, or a caller began to wait, meanwhile: wake it
      }
      return result;
    }
    beginRunAfterOthers();
    Status result = fn();
    endRun();
    return result;
  }

  // Queues fn for the worker thread. callerMayWait: whether a caller may
  // wait for this job itself (a request it holds); jobs nobody holds
  // (a device call's host side) always wake the worker.
  std::shared_ptr<AsyncOperation> submit(std::function<Status()> fn, bool callerMayWait = true);
  // Waits until the queue is empty and nothing runs (running what nothing
  // has started).
  void drain();
  // Nothing queued, running or waiting: a runNow now would start at once.
  bool idle() const { return state_.load(std::memory_order_relaxed) == 0; }
  // How many coming posts wake the worker at once before the next lazy
  // one (0: the next post is lazy).
  int postsWakingTheWorker();

  // How long the doorbell leaves a lazily posted job to its caller (a
  // Python caller's wait() comes 2-5 us after its post) before waking the
  // worker.
  static constexpr std::chrono::microseconds kWaiterGrace{20};
  // After a lazy post the worker had to run, this many posts wake the
  // worker before the next lazy one, doubling with each such miss in a
  // row up to 2^(kMostLazyMisses-1) times: a job whose posts are not
  // waited for at once (DDP's) then has about one post in a thousand
  // started by the doorbell.
  static constexpr int kWakingPostsAfterAMiss = 8;
  static constexpr int kMostLazyMisses = 8;

 private:
  struct Job {
    std::function<Status()> fn;
    std::shared_ptr<AsyncOperation> operation;
    std::chrono::steady_clock::time_point queued;
    bool lazy;  // posted with the doorbell rung, the worker not woken
  };
  friend class AsyncOperation;
  // While operation is still queued, runs the queued jobs up to and
  // including it on this thread whenever nothing else runs one; returns
  // once it is not queued (done, or taken by the worker).
  void runQueuedUpTo(const AsyncOperation* operation);
  // Under lock, with nothing running and a job queued: runs the front job
  // on this thread (lock released meanwhile); onWorker: this is the worker.
  void runFront(std::unique_lock<std::mutex>& lock, bool onWorker);
  void workerLoop();
  // Sleeps until rung (a job was queued), gives the caller kWaiterGrace to
  // claim it, then wakes the worker if nobody has.
  void doorbellLoop();
  // Waits until nothing queued before is left and nothing runs, then
  // holds kRunning; endRun() drops it and wakes whoever is next.
  void beginRunAfterOthers();
  void endRun();
  bool running() const { return (state_.load() & kRunning) != 0; }

  // kRunning while a job runs (on a caller's thread or the worker's), plus
  // kPending for each queued job and each caller waiting (to run, or in
  // drain): runNow's fast path claims only a zero, so anyone who needs to
  // be woken makes its release fail into endRun(). Changed under mutex_,
  // but for that claim (0 to kRunning) and release (kRunning to 0).
  static constexpr uint32_t kRunning = 1, kPending = 2;
  std::atomic<uint32_t> state_{0};
  std::mutex mutex_;
  std::condition_variable idle_;
  std::condition_variable work_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::thread worker_;
  std::condition_variable ring_;
  bool rung_ = false;  // under mutex_: a job was queued since the doorbell last looked
  std::thread doorbell_;
  // Under mutex_: lazy posts in a row that the worker had to run, and the
  // posts still to wake the worker before the next lazy one.
  int lazyMisses_ = 0;
  int wakingPostsLeft_ = 0;
};

}  // namespace fairway
