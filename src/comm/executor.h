// Runs a communicator's collectives one at a time, in call order. Blocking
// calls run on the caller's thread once earlier non-blocking ones are done;
// non-blocking calls queue for a worker thread that starts on first use and
// sleeps while the queue is empty.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "core/status.h"

namespace fairway {

// The completion side of a queued operation.
class AsyncOperation {
 public:
  bool isDone();
  // Blocks until done (the operation's own waits are bounded) and returns its result.
  Status wait();
  void complete(Status result);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  Status result_;
};

class Executor {
 public:
  ~Executor();

  // Runs fn on this thread after everything queued before it.
  template <typename F>
  Status runNow(F&& fn) {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
    busy_ = true;
    lock.unlock();
    Status result = fn();
    lock.lock();
    busy_ = false;
    idle_.notify_all();
    if (!queue_.empty()) work_.notify_one();  // a job queued meanwhile can start now
    return result;
  }

  // Queues fn for the worker thread.
  std::shared_ptr<AsyncOperation> submit(std::function<Status()> fn);
  // Waits until the queue is empty and nothing runs.
  void drain();

 private:
  struct Job {
    std::function<Status()> fn;
    std::shared_ptr<AsyncOperation> operation;
  };
  void workerLoop();

  std::mutex mutex_;
  std::condition_variable idle_;
  std::condition_variable work_;
  std::deque<Job> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace fairway
