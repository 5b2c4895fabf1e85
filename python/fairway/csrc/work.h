// A torch.distributed Work for one Fairway call, and its future.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "torch_hooks.h"

namespace fairway_torch {

// One operation's completion: set once, when Fairway tells (host tensors:
// completions.h), after the call returned (blocking host calls) or at once
// after enqueueing (CUDA tensors). Under torch's profiler it is an event
// from the call to its completion, named after the backend and the
// operation ("fairway:all_reduce") with its inputs' shapes; `title` is
// null when no profiler listens (the event costs an allocation a call) and
// must otherwise outlive the profiler's use of it (FairwayBackend::title).
//
// A host Work makes its future only when asked (getFuture: DDP's hooks,
// torch's functional collectives): a small blocking call whose Work nobody
// asks for one then costs no future, no list of its outputs and no
// completion of either. A device Work makes it at once: completing it
// records an event on the current stream, which is what wait() orders the
// stream after.
class FairwayWork : public c10d::Work {
 public:
  FairwayWork(const char* title, c10d::OpType type, const std::optional<std::vector<at::Tensor>>& inputs,
              std::vector<at::Tensor> outputs, std::optional<c10::Device> device, std::chrono::milliseconds timeout);
  bool isCompleted() override { return finished_.load(std::memory_order_acquire); }
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override { return outputs_; }

  void finish(std::exception_ptr error);
  // torch's hooks to tell when this Work finishes (torch_hooks.h), and the
  // key its completion is told under (0: nobody listens for completions).
  void tellWhenFinished(std::shared_ptr<const TorchHooks> hooks, uint64_t completionKey) {
    hooks_ = std::move(hooks);
    completionKey_ = completionKey;
  }
#ifdef FAIRWAY_TORCH_HOOKS
  uint64_t getCompletionKey() const override {
    return completionKey_ != 0 ? completionKey_ : c10d::Work::getCompletionKey();
  }
#endif
  // How a caller's wait() (with no timeout of its own) finishes this Work
  // on its own thread (waiting in Fairway), instead of waiting to be told.
  void finishOnWait(std::function<void()> finishHere);
  // A receive from any source: where Fairway writes the sender's rank,
  // which sourceRank() reads once the Work has completed.
  void reportSource(std::shared_ptr<int> source) { source_ = std::move(source); }
  int sourceRank() const override;

 private:
  c10::intrusive_ptr<c10::ivalue::Future> makeFuture() const;
  // Completes future with this Work's result (finished_ is set).
  void complete(c10::ivalue::Future& future) const;

  std::vector<at::Tensor> outputs_;
  std::optional<c10::Device> device_;
  std::shared_ptr<int> source_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  std::condition_variable done_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;  // under mutex_; made when first asked for (host)
  std::function<void()> finishHere_;  // under mutex_; dropped once finished
  // Set, with release, once error_ is final: a caller that sees it reads
  // error_ without the lock.
  std::atomic<bool> finished_{false};
  std::exception_ptr error_;
  std::shared_ptr<const TorchHooks> hooks_;
  uint64_t completionKey_ = 0;
};

}  // namespace fairway_torch
