// The completion and abort hooks torch registers on a backend (c10d's
// Hooks.hpp): its generic flight-recorder hook, attached to every fairway
// group, retires an entry as completed when the backend says its Work
// finished, and writes torch's dump (TORCH_FR_DUMP_TEMP_FILE) when the
// backend says a call failed. FairwayWork::finish tells them.
//
// Hooks run outside the table's lock (torch's hook takes its own lock
// and removes itself under it), on whichever thread finishes the Work.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#if defined(C10D_BACKEND_HAS_HOOKS) && __has_include(<torch/csrc/distributed/c10d/hooks/FlightRecorderHook.hpp>)
#define FAIRWAY_TORCH_HOOKS 1
#include <torch/csrc/distributed/c10d/Hooks.hpp>
#endif

namespace fairway_torch {

#ifdef FAIRWAY_TORCH_HOOKS

class TorchHooks {
 public:
  void addCompletion(int64_t id, c10d::CompletionHook hook) {
    std::lock_guard<std::mutex> lock(mutex_);
    completion_[id] = std::move(hook);
    anyCompletion_.store(true, std::memory_order_release);
  }
  void removeCompletion(int64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    completion_.erase(id);
    anyCompletion_.store(!completion_.empty(), std::memory_order_release);
  }
  void addAbort(int64_t id, c10d::AbortHook hook) {
    std::lock_guard<std::mutex> lock(mutex_);
    abort_[id] = std::move(hook);
  }
  void removeAbort(int64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    abort_.erase(id);
  }
  // Whether a Work needs a completion key (torch's hook is listening).
  bool wantsCompletion() const { return anyCompletion_.load(std::memory_order_acquire); }

  // A Work finished without error.
  void completed(uint64_t key) const {
    c10d::CompletionHookArgs args;
    args.completionKey = key;  // Fairway does not time its calls: no duration
    for (const auto& hook : copy(completion_)) hook(args);
  }
  // A Work failed: the communicator is broken or revoked (torch's hooks
  // are idempotent; each failed Work runs them).
  void failed() const {
    for (const auto& hook : copy(abort_)) hook();
  }

 private:
  template <typename Hook>
  std::vector<Hook> copy(const std::map<int64_t, Hook>& table) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<Hook> hooks;
    for (const auto& [id, hook] : table) hooks.push_back(hook);
    return hooks;
  }

  mutable std::mutex mutex_;
  std::map<int64_t, c10d::CompletionHook> completion_;
  std::map<int64_t, c10d::AbortHook> abort_;
  std::atomic<bool> anyCompletion_{false};
};

#else

// A torch without c10d's hooks: nothing registers, nothing is told.
class TorchHooks {
 public:
  bool wantsCompletion() const { return false; }
  void completed(uint64_t) const {}
  void failed() const {}
};

#endif

}  // namespace fairway_torch
