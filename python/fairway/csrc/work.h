// A torch.distributed Work for one Fairway call, and its future.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace fairway_torch {

// One operation's completion: set once, when Fairway tells (host tensors:
// completions.h) or at once after enqueueing (CUDA tensors). Under torch's
// profiler it is an event from the call to its completion, named after the
// backend and the operation ("fairway:all_reduce") with its inputs' shapes.
// `title` must outlive the profiler's use of it (FairwayBackend::title).
class FairwayWork : public c10d::Work {
 public:
  FairwayWork(const char* title, c10d::OpType type, const std::vector<at::Tensor>& inputs,
              std::vector<at::Tensor> outputs, c10::intrusive_ptr<c10::ivalue::Future> future,
              std::chrono::milliseconds timeout);
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return outputs_; }

  void finish(std::exception_ptr error);
  // How a caller's wait() (with no timeout of its own) finishes this Work
  // on its own thread (waiting in Fairway), instead of waiting to be told.
  void finishOnWait(std::function<void()> finishHere);
  // A receive from any source: where Fairway writes the sender's rank,
  // which sourceRank() reads once the Work has completed.
  void reportSource(std::shared_ptr<int> source) { source_ = std::move(source); }
  int sourceRank() const override;

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<int> source_;
  std::chrono::milliseconds timeout_;
  std::function<void()> finishHere_;  // under mutex_; dropped once finished
  mutable std::mutex mutex_;
  std::condition_variable done_;
  bool finished_ = false;
  std::exception_ptr error_;
};

}  // namespace fairway_torch
