#include "completions.h"

#include <algorithm>
#include <exception>

#include "fairway_backend.h"

namespace fairway_torch {

void Completions::told(fwResult_t result, void* arg) {
  std::unique_ptr<Told> told(static_cast<Told*>(arg));
  Entry& entry = *told->entry;
  if (entry.waiter == std::this_thread::get_id()) {
    entry.told[told->request] = 1;  // inside the waiter's own fwWait, which holds waitMutex
  } else {
    std::lock_guard<std::mutex> lock(entry.waitMutex);
    entry.told[told->request] = 1;
  }
  oneDone(told->entry, result, result == fwSuccess ? std::string() : lastMessage(result));
}

void Completions::oneDone(const EntryPtr& entry, fwResult_t result, const std::string& message) {
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(entry->mutex);
    if (result != fwSuccess && entry->firstError == fwSuccess) {
      entry->firstError = result;
      entry->firstMessage = message;
    }
    last = --entry->left == 0;
  }
  if (last) complete(*entry);
}

void Completions::complete(Entry& entry) {
  std::exception_ptr error;
  try {
    if (entry.firstError != fwSuccess) throwFairwayError(entry.firstError, entry.what, entry.firstMessage);
    if (entry.finish) entry.finish();
  } catch (...) {
    error = std::current_exception();
  }
  entry.finish = nullptr;  // the tensors it holds go now
  entry.work->finish(error);
}

// fwWait runs each request's notification on this thread (and a collective
// the worker has not started yet, too); a request whose notification a
// Fairway thread runs right now was completed there, and its fwWait returns
// that result: the Work finishes all the same.
void Completions::waitFor(const EntryPtr& entry) {
  if (entry->waitedFor.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lock(entry->waitMutex);
    entry->waiter = std::this_thread::get_id();
    for (size_t i = 0; i < entry->requests.size(); ++i) {
      if (!entry->told[i]) (void)fwWait(entry->requests[i]);
    }
    entry->waiter = std::thread::id();
  }
  for (const auto& w : entry->after) {
    try {
      w->wait(::kNoTimeout);
    } catch (...) {  // finish reports the first error
    }
  }
}

void Completions::remember(const EntryPtr& entry) {
  std::weak_ptr<Entry> weak = entry;
  entry->work->finishOnWait([weak]() {
    if (EntryPtr e = weak.lock()) waitFor(e);
  });
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](const auto& w) { return w.expired(); }),
                 pending_.end());
  pending_.push_back(weak);
}

void Completions::add(std::vector<fwRequest_t> requests, c10::intrusive_ptr<FairwayWork> work, Finish finish,
                      std::string what) {
  auto entry = std::make_shared<Entry>();
  entry->left = requests.size();
  entry->told.assign(requests.size(), 0);
  entry->requests = std::move(requests);
  entry->work = std::move(work);
  entry->finish = std::move(finish);
  entry->what = std::move(what);
  if (entry->left == 0) {
    complete(*entry);
    return;
  }
  remember(entry);
  // The entry lives while a notification is owed; a refused one (nothing
  // will run it) counts as done with its error.
  for (size_t i = 0; i < entry->requests.size(); ++i) {
    auto* arg = new Told{entry, i};
    const fwResult_t asked = fwRequestOnComplete(entry->requests[i], &Completions::told, arg);
    if (asked != fwSuccess) {
      delete arg;
      {
        std::lock_guard<std::mutex> lock(entry->waitMutex);
        entry->told[i] = 1;  // nothing to wait for
      }
      oneDone(entry, asked, lastMessage(asked));
    }
  }
}

void Completions::addAfter(std::vector<c10::intrusive_ptr<FairwayWork>> after, c10::intrusive_ptr<FairwayWork> work,
                           Finish finish, std::string what) {
  auto entry = std::make_shared<Entry>();
  entry->left = after.size() + 1;  // one more, dropped below once every callback is added
  entry->after = after;
  entry->work = std::move(work);
  entry->finish = std::move(finish);
  entry->what = std::move(what);
  remember(entry);
  // A Work's future completes as the Work finishes (at once if it has);
  // finish rethrows the region's first error.
  for (const auto& w : after) {
    w->getFuture()->addCallback([entry](c10::ivalue::Future&) { oneDone(entry, fwSuccess, {}); });
  }
  oneDone(entry, fwSuccess, {});
}

void Completions::stop() {
  std::vector<std::weak_ptr<Entry>> pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending.swap(pending_);
  }
  for (const auto& weak : pending) {
    if (EntryPtr entry = weak.lock()) waitFor(entry);
  }
}

}  // namespace fairway_torch
