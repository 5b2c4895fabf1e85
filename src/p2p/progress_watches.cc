#include "p2p/progress_watches.h"

#include <algorithm>

namespace fairway {

void ProgressWatches::add(std::shared_ptr<ProgressWatch> watch) {
  std::lock_guard<std::mutex> lock(mutex_);
  watches_.push_back(std::move(watch));
  count_.store(watches_.size(), std::memory_order_release);
}

// Polled outside the lock, so a watch's owner can add another meanwhile
// (a completion that posts the next message).
void ProgressWatches::pollAll() {
  if (empty()) return;
  std::vector<std::shared_ptr<ProgressWatch>> now;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    now = watches_;
  }
  std::vector<ProgressWatch*> done;
  for (const auto& watch : now) {
    if (watch->poll()) done.push_back(watch.get());
  }
  if (done.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  watches_.erase(std::remove_if(watches_.begin(), watches_.end(),
                                [&](const std::shared_ptr<ProgressWatch>& w) {
                                  return std::find(done.begin(), done.end(), w.get()) != done.end();
                                }),
                 watches_.end());
  count_.store(watches_.size(), std::memory_order_release);
}

void ProgressWatches::abandonAll(const Status& why) {
  std::vector<std::shared_ptr<ProgressWatch>> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left.swap(watches_);
    count_.store(0, std::memory_order_release);
  }
  for (const auto& watch : left) watch->abandon(why);
}

}  // namespace fairway
