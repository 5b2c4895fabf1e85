#include "work.h"

#include <c10/util/Exception.h>

namespace fairway_torch {

FairwayWork::FairwayWork(const char* title, c10d::OpType type, const std::vector<at::Tensor>& inputs,
                         std::vector<at::Tensor> outputs, c10::intrusive_ptr<c10::ivalue::Future> future,
                         std::chrono::milliseconds timeout)
    : c10d::Work(-1, type, title, inputs),
      outputs_(std::move(outputs)),
      future_(std::move(future)),
      timeout_(timeout) {}

int FairwayWork::sourceRank() const {
  if (!source_) return c10d::Work::sourceRank();  // torch's error: not a receive from any source
  return *source_;
}

bool FairwayWork::isCompleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  return finished_;
}

bool FairwayWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return finished_ && !error_;
}

std::exception_ptr FairwayWork::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void FairwayWork::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
    error_ = error;
    finishHere_ = nullptr;
  }
  if (recordFunctionEndCallback_) {  // the profiler's event ends here
    recordFunctionEndCallback_();
    recordFunctionEndCallback_ = nullptr;
  }
  done_.notify_all();
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

void FairwayWork::finishOnWait(std::function<void()> finishHere) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!finished_) finishHere_ = std::move(finishHere);
}

// Fairway bounds every operation by the group's timeout, so the default
// wait ends; a caller's shorter timeout is honoured here.
bool FairwayWork::wait(std::chrono::milliseconds timeout) {
  if (timeout == kNoTimeout) {  // Fairway's own wait is bounded by the group's timeout
    std::function<void()> finishHere;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!finished_) finishHere = finishHere_;
    }
    if (finishHere) finishHere();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  const auto limit = timeout == kNoTimeout ? timeout_ + std::chrono::seconds(60) : timeout;
  if (!done_.wait_for(lock, limit, [&] { return finished_; })) {
    TORCH_CHECK_WITH(DistBackendError, false, "fairway: operation did not complete within ", limit.count(), " ms");
  }
  if (error_) std::rethrow_exception(error_);
  lock.unlock();
  // CUDA: makes the current stream wait for the operation's stream.
  future_->wait();
  return true;
}

}  // namespace fairway_torch
