// What a communicator's progress thread looks at besides the transports:
// requests whose owners asked to be told when they complete
// (fwRequestOnComplete), so no caller keeps a thread of its own testing
// them. Each is polled after the thread's rounds of progress until it
// says it is done; those still pending when the communicator closes are
// abandoned with the reason.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "core/status.h"

namespace fairway {

class ProgressWatch {
 public:
  virtual ~ProgressWatch() = default;
  // Whether it is done (then it is dropped). May test messages, so it is
  // called without the messenger's lock.
  virtual bool poll() = 0;
  // The communicator closes with it pending.
  virtual void abandon(const Status& why) = 0;
};

class ProgressWatches {
 public:
  void add(std::shared_ptr<ProgressWatch> watch);
  bool empty() const { return count_.load(std::memory_order_acquire) == 0; }
  // Polls each once (on the progress thread only).
  void pollAll();
  void abandonAll(const Status& why);

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<ProgressWatch>> watches_;
  std::atomic<size_t> count_{0};
};

}  // namespace fairway
