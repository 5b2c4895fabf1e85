#include "comm/executor.h"

namespace fairway {

bool AsyncOperation::isDone() {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

Status AsyncOperation::wait() {
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
  }
  if (worker_.joinable()) worker_.join();
}

std::shared_ptr<AsyncOperation> Executor::submit(std::function<Status()> fn) {
  auto operation = std::make_shared<AsyncOperation>();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!worker_.joinable()) worker_ = std::thread([this] { workerLoop(); });
  queue_.push_back(Job{std::move(fn), operation});
  state_.fetch_add(kPending);
  work_.notify_one();
  return operation;
}

void Executor::beginRunAfterOthers() {
  std::unique_lock<std::mutex> lock(mutex_);
  state_.fetch_add(kPending);
  idle_.wait(lock, [&] { return queue_.empty() && !running(); });
  state_.fetch_sub(kPending - kRunning);  // waiting, now running
}

void Executor::endRun() {
  std::lock_guard<std::mutex> lock(mutex_);
  state_.fetch_sub(kRunning);
  idle_.notify_all();
  if (!queue_.empty()) work_.notify_one();  // a job queued meanwhile can start now
}

void Executor::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  state_.fetch_add(kPending);
  idle_.wait(lock, [&] { return queue_.empty() && !running(); });
  state_.fetch_sub(kPending);
}

void Executor::workerLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stopping_ || (!queue_.empty() && !running()); });
    if (queue_.empty()) return;  // stopping, nothing left
    Job job = std::move(queue_.front());
    queue_.pop_front();
    state_.fetch_sub(kPending - kRunning);  // queued, now running
    lock.unlock();
    Status result = job.fn();
    job.operation->complete(std::move(result));
    lock.lock();
    state_.fetch_sub(kRunning);
    idle_.notify_all();
  }
}

}  // namespace fairway
