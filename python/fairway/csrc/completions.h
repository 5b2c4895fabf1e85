// Finishes the Works of a backend's host calls as Fairway completes them,
// with no thread of its own: each request carries a notification
// (fwRequestOnComplete) that Fairway runs once its operation is done, on
// Fairway's worker (collectives, in call order) or progress thread
// (messages, in whatever order they complete, so a receive's Work finishes
// when its data is in, whatever was called before it), or on the thread
// of a caller's wait. A Work of several requests (a CPU gather's messages)
// finishes with the last of them, failed by the first failure.
//
// A caller that waits for a Work does not wait for the notification: it
// waits for the Work's requests in Fairway itself (fwWait), which
// progresses the messages on its own thread and runs the notification
// there the moment they are done.
#pragma once

#include <fairway/fairway.h>

#include <atomic>
#include <functional>
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

  ~Completions() { stop(); }
  // Waits for every Work still pending (each request's wait bounded by
  // Fairway's timeout), so none is left to a communicator about to go.
  // Idempotent.
  void stop();

  // requests (posted just now) complete `work`, after `finish` ran.
  void add(std::vector<fwRequest_t> requests, c10::intrusive_ptr<FairwayWork> work, Finish finish,
           std::string what);
  // A Work finished once every Work of `after` has (a coalescing region);
  // `finish` may rethrow their first error.
  void addAfter(std::vector<c10::intrusive_ptr<FairwayWork>> after, c10::intrusive_ptr<FairwayWork> work,
                Finish finish, std::string what);

 private:
  struct Entry {
    std::mutex mutex;
    size_t left = 0;                     // requests (or Works) not yet done
    fwResult_t firstError = fwSuccess;   // under mutex
    std::string firstMessage;            // Fairway's message for it
    std::vector<fwRequest_t> requests;   // set once, before any notification
    std::vector<c10::intrusive_ptr<FairwayWork>> after;
    std::atomic<bool> waitedFor{false};  // a caller (or stop) waits for the requests
    c10::intrusive_ptr<FairwayWork> work;
    Finish finish;
    std::string what;
    // A caller waiting in Fairway holds waitMutex while it calls fwWait on
    // the requests not yet told; a notification on another thread marks
    // its request told under it. Fairway releases a request only after its
    // notification returns, so each fwWait finds a live request: one told
    // meanwhile returns its result there, one told before is skipped.
    std::mutex waitMutex;
    std::vector<char> told;                // per request, under waitMutex
    std::thread::id waiter;                // under waitMutex: the thread inside fwWait, if any
  };
  using EntryPtr = std::shared_ptr<Entry>;
  // What a notification's arg points to (heap-held, freed when it runs).
  struct Told {
    EntryPtr entry;
    size_t request;
  };

  // Fairway's notification; arg is a heap-held Told, freed here.
  static void told(fwResult_t result, void* arg);
  // One of entry's requests (or Works) is done with result.
  static void oneDone(const EntryPtr& entry, fwResult_t result, const std::string& message);
  static void complete(Entry& entry);
  // Waits in Fairway for entry's requests (once, whoever asks first).
  static void waitFor(const EntryPtr& entry);
  void remember(const EntryPtr& entry);

  std::mutex mutex_;
  std::vector<std::weak_ptr<Entry>> pending_;  // for stop(); pruned as entries go
};

}  // namespace fairway_torch
