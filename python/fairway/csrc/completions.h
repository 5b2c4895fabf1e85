// Finishes the Works of a backend's host calls as Fairway completes them.
//
// Collectives complete in call order in Fairway, so one thread waits for
// each in turn (fwWait: no polling). Messages cannot join that line: a
// receive's Work must finish when its data is in, whatever collective or
// message was called before it, or two ranks can each wait for a Work that
// the other's next call would unblock (gloo finishes each Work on its own).
// A second thread tests messages, and the markers of coalescing regions,
// in any order, polling with a backoff while none completes; it looks for
// new ones on a tick rather than being woken for each, and leaves each to
// its caller for a moment before testing it (see the .cpp).
//
// Those threads finish Works nobody waits for (isCompleted, futures). A
// caller that waits for a Work does not wait for them: it claims the
// Work's entry and waits in Fairway itself, which progresses the messages
// on its own thread and wakes it the moment they are done. Whoever holds
// an entry's claim is the only one testing or waiting for its requests;
// the threads skip an entry a caller has claimed.
#pragma once

#include <fairway/fairway.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <c10/util/intrusive_ptr.h>

namespace fairway_torch {

class FairwayWork;

class Completions {
 public:
  // What runs once a call's data is in place (copies out of temporaries),
  // before its Work completes; an exception it throws fails the Work.
  using Finish = std::function<void()>;

  Completions();
  ~Completions() { stop(); }
  // Finishes everything queued (each wait bounded by Fairway's timeout),
  // then ends the threads. Idempotent.
  void stop();

  // A collective's request, finished in call order.
  void addInOrder(fwRequest_t request, c10::intrusive_ptr<FairwayWork> work, Finish finish, std::string what);
  // Messages' requests (one call's), finished as soon as all complete.
  void addAnyOrder(std::vector<fwRequest_t> requests, c10::intrusive_ptr<FairwayWork> work, Finish finish,
                   std::string what);
  // A Work finished once every Work of `after` has (a coalescing region);
  // `finish` may rethrow their first error.
  void addAfter(std::vector<c10::intrusive_ptr<FairwayWork>> after, c10::intrusive_ptr<FairwayWork> work,
                Finish finish, std::string what);

 private:
  struct Entry {
    std::chrono::steady_clock::time_point added;
    std::mutex claim;                   // held while testing or waiting for the requests
    bool finished = false;              // under claim: the Work has been finished
    std::vector<fwRequest_t> requests;  // none: a marker, done when `after` all are
    fwResult_t firstError = fwSuccess;  // among the requests done so far
    std::vector<c10::intrusive_ptr<FairwayWork>> after;
    c10::intrusive_ptr<FairwayWork> work;
    Finish finish;
    std::string what;
  };
  using EntryPtr = std::shared_ptr<Entry>;

  static EntryPtr makeEntry(std::vector<fwRequest_t> requests, std::vector<c10::intrusive_ptr<FairwayWork>> after,
                            c10::intrusive_ptr<FairwayWork> work, Finish finish, std::string what);
  // Lets a caller waiting for entry's Work finish it on its own thread.
  static void offerToWaiters(const EntryPtr& entry);
  void inOrderLoop();
  void anyOrderLoop();
  // One test of entry's requests (with block, a bounded wait for each);
  // true when its Work has been finished. The caller holds entry.claim.
  static bool tryFinish(Entry& entry, bool block);
  static void complete(Entry& entry, fwResult_t result);

  std::mutex mutex_;
  std::condition_variable inOrderQueued_;
  std::condition_variable anyOrderQueued_;
  std::deque<EntryPtr> inOrder_;
  std::deque<EntryPtr> anyOrderIncoming_;
  bool stopping_ = false;
  bool anyOrderSleeping_ = false;  // the any-order thread waits to be woken
  std::thread inOrderThread_;
  std::thread anyOrderThread_;
};

}  // namespace fairway_torch
