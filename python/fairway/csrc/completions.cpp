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
// With nothing to test, the any-order thread looks for new entries once
// a tick instead of being woken for each: waking it costs a post a
// context switch, and on a host with as many ranks as cores it takes the
// core of a peer rank (64 KiB send/recv on 2 ranks and 2 cores: 68-114 us
// per exchange with a wake per post, 33-57 us without). A caller that
// waits needs no thread; the tick bounds how late a Work nobody waits for
// completes. After kDeepSleepAfter with nothing, the thread sleeps until
// woken, and posts wake it: an idle group costs nothing.
constexpr std::chrono::milliseconds kIdleTick{1};
constexpr std::chrono::milliseconds kDeepSleepAfter{100};
// A new entry is left to its caller this long before the thread tests it:
// most are waited for at once (isend, irecv, then wait), and a caller's
// wait finishes them on its own thread; the thread's tests in that time
// only took a peer rank's core from it (2 ranks on 2 cores, 4 MiB
// isend/irecv/wait: 159 preemptions of the caller in 200 exchanges). A
// Work nobody waits for completes at most this much later.
constexpr std::chrono::milliseconds kLeftToCaller{1};
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

Completions::EntryPtr Completions::makeEntry(std::vector<fwRequest_t> requests,
                                             std::vector<c10::intrusive_ptr<FairwayWork>> after,
                                             c10::intrusive_ptr<FairwayWork> work, Finish finish, std::string what) {
  auto entry = std::make_shared<Entry>();
  entry->added = std::chrono::steady_clock::now();
  entry->requests = std::move(requests);
  entry->after = std::move(after);
  entry->work = std::move(work);
  entry->finish = std::move(finish);
  entry->what = std::move(what);
  offerToWaiters(entry);
  return entry;
}

// The Work keeps only a weak reference: the entry holds the Work, and is
// gone once finished.
void Completions::offerToWaiters(const EntryPtr& entry) {
  std::weak_ptr<Entry> weak = entry;
  entry->work->finishOnWait([weak]() {
    EntryPtr claimed = weak.lock();
    if (!claimed) return;  // finished, and dropped by the threads
    std::lock_guard<std::mutex> claim(claimed->claim);
    if (!claimed->finished) tryFinish(*claimed, true);
  });
}

void Completions::addInOrder(fwRequest_t request, c10::intrusive_ptr<FairwayWork> work, Finish finish,
                             std::string what) {
  EntryPtr entry = makeEntry({request}, {}, std::move(work), std::move(finish), std::move(what));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    inOrder_.push_back(std::move(entry));
  }
  inOrderQueued_.notify_one();
}

void Completions::addAnyOrder(std::vector<fwRequest_t> requests, c10::intrusive_ptr<FairwayWork> work,
                              Finish finish, std::string what) {
  EntryPtr entry = makeEntry(std::move(requests), {}, std::move(work), std::move(finish), std::move(what));
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    anyOrderIncoming_.push_back(std::move(entry));
    wake = anyOrderSleeping_;
  }
  if (wake) anyOrderQueued_.notify_one();
}

void Completions::addAfter(std::vector<c10::intrusive_ptr<FairwayWork>> after, c10::intrusive_ptr<FairwayWork> work,
                           Finish finish, std::string what) {
  EntryPtr entry = makeEntry({}, std::move(after), std::move(work), std::move(finish), std::move(what));
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    anyOrderIncoming_.push_back(std::move(entry));
    wake = anyOrderSleeping_;
  }
  if (wake) anyOrderQueued_.notify_one();
}

void Completions::complete(Entry& entry, fwResult_t result) {
  entry.finished = true;
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
    EntryPtr next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      inOrderQueued_.wait(lock, [&] { return stopping_ || !inOrder_.empty(); });
      if (inOrder_.empty()) return;  // stopping, and nothing left
      next = std::move(inOrder_.front());
      inOrder_.pop_front();
    }
    // A caller waiting for this Work may hold the claim: then it finishes
    // the Work, and this waits for that.
    std::lock_guard<std::mutex> claim(next->claim);
    if (!next->finished) complete(*next, fwWait(next->requests.front()));
  }
}

bool Completions::tryFinish(Entry& entry, bool block) {
  if (entry.requests.empty()) {
    if (block) {
      for (const auto& w : entry.after) {
        try {
          w->wait(::kNoTimeout);
        } catch (...) {  // finish reports the first error
        }
      }
    }
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
  std::list<EntryPtr> pending;
  std::chrono::microseconds pause{0};
  auto idleSince = std::chrono::steady_clock::now();
  for (;;) {
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      auto arrived = [&] { return stopping_ || !anyOrderIncoming_.empty(); };
      if (!pending.empty()) {
        idleSince = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - idleSince < kDeepSleepAfter) {
        anyOrderQueued_.wait_for(lock, kIdleTick, arrived);
      } else {
        anyOrderSleeping_ = true;
        anyOrderQueued_.wait(lock, arrived);
        anyOrderSleeping_ = false;
        idleSince = std::chrono::steady_clock::now();
      }
      if (!pending.empty() && pause.count() > 0) {
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
    const auto now = std::chrono::steady_clock::now();
    bool progressed = false;
    bool tested = false;  // some entry was tested and is not done
    auto firstLook = std::chrono::steady_clock::time_point::max();  // of the entries still left to their callers
    for (auto it = pending.begin(); it != pending.end();) {
      Entry& entry = **it;
      if (!stopping && now - entry.added < kLeftToCaller) {
        firstLook = std::min(firstLook, entry.added + kLeftToCaller);
        ++it;
        continue;
      }
      std::unique_lock<std::mutex> claim(entry.claim, std::try_to_lock);
      if (!claim.owns_lock()) {  // a waiting caller finishes it
        ++it;
        continue;
      }
      if (entry.finished || tryFinish(entry, stopping)) {
        claim.unlock();
        it = pending.erase(it);
        progressed = true;
      } else {
        tested = true;
        ++it;
      }
    }
    if (progressed) {
      pause = std::chrono::microseconds{0};
    } else if (tested) {
      pause = std::min(kLongestPause, std::max(kFirstPause, pause * 2));
    } else {
      // Every entry is a caller's, now or for a while yet: look again when
      // the first of them is left to this thread, or on the tick (a
      // claimed entry is finished by its caller and dropped then).
      const auto untilFirstLook = std::chrono::duration_cast<std::chrono::microseconds>(firstLook - now);
      pause = std::max(std::chrono::microseconds{1},
                       std::min<std::chrono::microseconds>(kIdleTick, untilFirstLook));
    }
  }
}

}  // namespace fairway_torch
