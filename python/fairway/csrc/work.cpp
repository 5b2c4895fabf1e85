#include "work.h"

#include <c10/util/Exception.h>

namespace fairway_torch {

FairwayWork::FairwayWork(const char* title, c10d::OpType type, const std::optional<std::vector<at::Tensor>>& inputs,
                         std::vector<at::Tensor> outputs, std::optional<c10::Device> device,
                         std::chrono::milliseconds timeout)
    : c10d::Work(-1, type, title, inputs), outputs_(std::move(outputs)), device_(device), timeout_(timeout) {
  if (device_) future_ = makeFuture();
}

c10::intrusive_ptr<c10::ivalue::Future> FairwayWork::makeFuture() const {
  auto listType = c10::ListType::create(c10::TensorType::get());
  return device_ ? c10::make_intrusive<c10::ivalue::Future>(listType, std::vector<c10::Device>{*device_})
                 : c10::make_intrusive<c10::ivalue::Future>(listType);
}

void FairwayWork::complete(c10::ivalue::Future& future) const {
  if (error_) {
    future.setError(error_);
  } else {
    future.markCompleted(c10::IValue(outputs_));
  }
}

int FairwayWork::sourceRank() const {
  if (!source_) return c10d::Work::sourceRank();  // torch's error: not a receive from any source
  return *source_;
}

bool FairwayWork::isSuccess() const { return finished_.load(std::memory_order_acquire) && !error_; }

std::exception_ptr FairwayWork::exception() const {
  return finished_.load(std::memory_order_acquire) ? error_ : nullptr;
}

c10::intrusive_ptr<c10::ivalue::Future> FairwayWork::getFuture() {
  c10::intrusive_ptr<c10::ivalue::Future> future;
  bool completeHere = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!future_) {
      future_ = makeFuture();
      completeHere = finished_.load(std::memory_order_acquire);  // else finish() completes it
    }
    future = future_;
  }
  if (completeHere) complete(*future);
  return future;
}

void FairwayWork::finish(std::exception_ptr error) {
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = error;
    finished_.store(true, std::memory_order_release);
    finishHere_ = nullptr;
    future = future_;  // made before now: completed here; made later: by getFuture
  }
  if (recordFunctionEndCallback_) {  // the profiler's event ends here
    recordFunctionEndCallback_();
    recordFunctionEndCallback_ = nullptr;
  }
  done_.notify_all();
  if (future) complete(*future);
  if (hooks_) {
    if (error) {
      hooks_->failed();
    } else if (completionKey_ != 0) {
      hooks_->completed(completionKey_);
    }
  }
}

void FairwayWork::finishOnWait(std::function<void()> finishHere) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!finished_.load(std::memory_order_relaxed)) finishHere_ = std::move(finishHere);
}

// Fairway bounds every operation by the group's timeout, so the default
// wait ends; a caller's shorter timeout is honoured here.
bool FairwayWork::wait(std::chrono::milliseconds timeout) {
  if (!finished_.load(std::memory_order_acquire)) {
    if (timeout == kNoTimeout) {  // Fairway's own wait is bounded by the group's timeout
      std::function<void()> finishHere;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!finished_.load(std::memory_order_relaxed)) finishHere = finishHere_;
      }
      if (finishHere) finishHere();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    const auto limit = timeout == kNoTimeout ? timeout_ + std::chrono::seconds(60) : timeout;
    if (!done_.wait_for(lock, limit, [&] { return finished_.load(std::memory_order_relaxed); })) {
      TORCH_CHECK_WITH(DistBackendError, false, "fairway: operation did not complete within ", limit.count(), " ms");
    }
  }
  if (error_) std::rethrow_exception(error_);
  // CUDA: makes the current stream wait for the operation's stream.
  if (device_) getFuture()->wait();
  return true;
}

}  // namespace fairway_torch
