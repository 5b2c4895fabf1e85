#include "comm/executor.h"

#include <sched.h>

#include <algorithm>

namespace fairway {

bool AsyncOperation::isDone() {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

Status AsyncOperation::wait() {
  if (!isDone() && executor_ != nullptr) executor_->runQueuedUpTo(this);
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
  return result_;
}

void AsyncOperation::complete(Status result) {
  std::vector<std::function<void(const Status&)>> then;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    result_ = std::move(result);
    done_ = true;
    cv_.notify_all();
    then.swap(whenDone_);
  }
  for (auto& fn : then) fn(result_);  // result_ no longer changes
}

void AsyncOperation::whenDone(std::function<void(const Status&)> fn) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!done_) {
      whenDone_.push_back(std::move(fn));
      return;
    }
  }
  fn(result_);
}

Executor::~Executor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    work_.notify_all();
    ring_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
  if (doorbell_.joinable()) doorbell_.join();
}

std::shared_ptr<AsyncOperation> Executor::submit(std::function<Status()> fn, bool callerMayWait) {
  auto operation = std::make_shared<AsyncOperation>();
  operation->executor_ = this;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!worker_.joinable()) worker_ = std::thread([this] { workerLoop(); });
  const bool lazy = callerMayWait && wakingPostsLeft_ == 0;
  queue_.push_back(Job{std::move(fn), operation, std::chrono::steady_clock::now(), lazy});
  state_.fetch_add(kPending);
  if (lazy) {
    if (!doorbell_.joinable()) doorbell_ = std::thread([this] { doorbellLoop(); });
    rung_ = true;
    ring_.notify_one();
  } else {
    if (callerMayWait) --wakingPostsLeft_;
    work_.notify_one();
  }
  return operation;
}

void Executor::runFront(std::unique_lock<std::mutex>& lock, bool onWorker) {
  Job job = std::move(queue_.front());
  queue_.pop_front();
  state_.fetch_sub(kPending - kRunning);  // queued, now running
  lock.unlock();
  Status result = job.fn();
  if (job.lazy) {
    // Before the operation completes, so whoever sees it done sees this.
    // A lazy post the worker had to run: its caller did not wait at once.
    lock.lock();
    lazyMisses_ = onWorker ? std::min(lazyMisses_ + 1, kMostLazyMisses) : 0;
    if (onWorker) wakingPostsLeft_ = kWakingPostsAfterAMiss << (lazyMisses_ - 1);
    lock.unlock();
  }
  job.operation->complete(std::move(result));
  lock.lock();
  state_.fetch_sub(kRunning);
  idle_.notify_all();
}

void Executor::runQueuedUpTo(const AsyncOperation* operation) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto queued = [&] {
    for (const Job& job : queue_) {
      if (job.operation.get() == operation) return true;
    }
    return false;
  };
  while (queued()) {
    if (running()) {  // an earlier job runs (on the worker, say): ours may be next
      state_.fetch_add(kPending);
      idle_.wait(lock, [&] { return !running() || !queued(); });
      state_.fetch_sub(kPending);
      continue;
    }
    const bool ours = queue_.front().operation.get() == operation;
    runFront(lock, false);
    if (ours) break;
  }
  if (!queue_.empty() && !running()) work_.notify_one();  // the worker takes the rest
}

void Executor::beginRunAfterOthers() {
  std::unique_lock<std::mutex> lock(mutex_);
  state_.fetch_add(kPending);
  for (;;) {
    if (running()) {
      idle_.wait(lock);
    } else if (!queue_.empty()) {
      runFront(lock, false);  // what was queued before this call runs first, here if nothing has started it
    } else {
      break;
    }
  }
  state_.fetch_sub(kPending - kRunning);  // waiting, now running
}

void Executor::endRun() {
  std::lock_guard<std::mutex> lock(mutex_);
  state_.fetch_sub(kRunning);
  idle_.notify_all();
  if (!queue_.empty()) work_.notify_one();  // a job queued meanwhile can start now
}

int Executor::postsWakingTheWorker() {
  std::lock_guard<std::mutex> lock(mutex_);
  return wakingPostsLeft_;
}

void Executor::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  state_.fetch_add(kPending);
  for (;;) {
    if (running()) {
      idle_.wait(lock);
    } else if (!queue_.empty()) {
      runFront(lock, false);
    } else {
      break;
    }
  }
  state_.fetch_sub(kPending);
}

void Executor::doorbellLoop() {
  // Where the class cannot be set (a seccomp filter, say) the doorbell
  // runs at normal priority: slower posts, the same behaviour.
  sched_param unused{};
  (void)sched_setscheduler(0, SCHED_IDLE, &unused);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    ring_.wait(lock, [&] { return stopping_ || rung_; });
    if (stopping_) return;
    rung_ = false;
    if (queue_.empty() || running()) continue;  // claimed already; whoever runs it hands on the rest
    const auto claimBy = queue_.front().queued + kWaiterGrace;
    if (std::chrono::steady_clock::now() < claimBy) {
      lock.unlock();
      // Yielding at SCHED_IDLE takes only time no other thread wants.
      while (!running() && std::chrono::steady_clock::now() < claimBy) sched_yield();
      lock.lock();
    }
    if (!queue_.empty() && !running()) work_.notify_one();
  }
}

void Executor::workerLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stopping_ || (!queue_.empty() && !running()); });
    if (queue_.empty()) return;  // stopping, nothing left
    runFront(lock, true);
  }
}

}  // namespace fairway
