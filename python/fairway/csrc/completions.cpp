#include "completions.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "fairway_backend.h"

namespace fairway_torch {

namespace {
// The any-order thread's pause between rounds in which nothing completed:
// doubling from the first to the longest, so a message that completes
// after a long wait is seen at most this late, and an idle group costs
// a few thousand cheap tests a second.
constexpr std::chrono::microseconds kFirstPause{10};
constexpr std::chrono::microseconds kLongestPause{200};
}  // namespace

Completions::Completions() {
  inOrderThread_ = std::thread([this] { inOrderLoop(); });
  anyOrderThread_ = std::thread([this] { anyOrderLoop(); });
}

void Completions::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  inOrderQueued_.notify_all();
  anyOrderQueued_.notify_all();
  if (inOrderThread_.joinable()) inOrderThread_.join();
  if (anyOrderThread_.joinable()) anyOrderThread_.join();
}

void Completions::addInOrder(fwRequest_t request, c10::intrusive_ptr<FairwayWork> work, Finish finish,
                             std::string what) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    inOrder_.push_back(Entry{{request}, fwSuccess, {}, std::move(work), std::move(finish), std::move(what)});
  }
  inOrderQueued_.notify_one();
}

void Completions::addAnyOrder(std::vector<fwRequest_t> requests, c10::intrusive_ptr<FairwayWork> work,
                              Finish finish, std::string what) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    anyOrderIncoming_.push_back(
        Entry{std::move(requests), fwSuccess, {}, std::move(work), std::move(finish), std::move(what)});
  }
  anyOrderQueued_.notify_one();
}

void Completions::addAfter(std::vector<c10::intrusive_ptr<FairwayWork>> after, c10::intrusive_ptr<FairwayWork> work,
                           Finish finish, std::string what) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    anyOrderIncoming_.push_back(
        Entry{{}, fwSuccess, std::move(after), std::move(work), std::move(finish), std::move(what)});
  }
  anyOrderQueued_.notify_one();
}

void Completions::complete(Entry& entry, fwResult_t result) {
  std::exception_ptr error;
  try {
    if (result != fwSuccess) throwFairwayError(result, entry.what);
    if (entry.finish) entry.finish();
  } catch (...) {
    error = std::current_exception();
  }
  entry.work->finish(error);
}

void Completions::inOrderLoop() {
  for (;;) {
    Entry next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      inOrderQueued_.wait(lock, [&] { return stopping_ || !inOrder_.empty(); });
      if (inOrder_.empty()) return;  // stopping, and nothing left
      next = std::move(inOrder_.front());
      inOrder_.pop_front();
    }
    complete(next, fwWait(next.requests.front()));
  }
}

bool Completions::tryFinish(Entry& entry, bool block) {
  if (entry.requests.empty()) {
    const bool ready = std::all_of(entry.after.begin(), entry.after.end(),
                                   [](const c10::intrusive_ptr<FairwayWork>& w) { return w->isCompleted(); });
    if (ready) complete(entry, entry.firstError);
    return ready;
  }
  // A request that completes, or fails, is released and leaves the list.
  auto finished = [&](fwRequest_t request) {
    int done = 1;
    const fwResult_t result = block ? fwWait(request) : fwTest(request, &done);
    if (done && result != fwSuccess && entry.firstError == fwSuccess) entry.firstError = result;
    return done != 0;
  };
  entry.requests.erase(std::remove_if(entry.requests.begin(), entry.requests.end(), finished), entry.requests.end());
  if (!entry.requests.empty()) return false;
  complete(entry, entry.firstError);
  return true;
}

void Completions::anyOrderLoop() {
  std::list<Entry> pending;
  std::chrono::microseconds pause{0};
  for (;;) {
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      auto arrived = [&] { return stopping_ || !anyOrderIncoming_.empty(); };
      if (pending.empty()) {
        anyOrderQueued_.wait(lock, arrived);
      } else if (pause.count() > 0) {
        anyOrderQueued_.wait_for(lock, pause, arrived);
      }
      while (!anyOrderIncoming_.empty()) {
        pending.push_back(std::move(anyOrderIncoming_.front()));
        anyOrderIncoming_.pop_front();
      }
      stopping = stopping_;
    }
    if (pending.empty()) {
      if (stopping) return;
      continue;
    }
    // Once stopping, each message gets Fairway's bounded wait instead of
    // tests, so the thread ends even if a peer never sends.
    bool progressed = false;
    for (auto it = pending.begin(); it != pending.end();) {
      if (tryFinish(*it, stopping)) {
        it = pending.erase(it);
        progressed = true;
      } else {
        ++it;
      }
    }
    pause = progressed ? std::chrono::microseconds{0}
                       : std::min(kLongestPause, std::max(kFirstPause, pause * 2));
  }
}

}  // namespace fairway_torch
