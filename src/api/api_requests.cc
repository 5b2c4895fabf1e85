// C entry points for requests: fwTest, fwWait and fwRequestOnComplete.
//
// A request completes once, by whoever gets there first: the fwWait or
// fwTest that sees it done, or, for a request with a notification, the
// communicator's worker (collectives) or progress thread (messages). Each
// completes it under the request's claim, so the notification runs
// exactly once, after the claim is dropped.
#include <string>

#include "api/handles.h"
#include "core/errors.h"

using namespace fairway;

namespace {

// A send/recv request needs its communicator alive to make progress.
Status communicatorOf(const RequestState& request, Communicator** out) {
  return lookupComm(request.comm, out).withContext("the request's communicator");
}

// A completed receive tells its caller the sender, where it asked.
void reportSource(const RequestState& request) {
  if (request.source == nullptr) return;
  *request.source = request.anySource ? request.anySource->source : request.message.peer;
}

// One test of a message's request on its communicator.
Status testMessage(Communicator& impl, RequestState& request, bool* finished) {
  Pending* message = &request.message;
  if (request.anySource) {
    AnySourceReceive& receive = *request.anySource;
    if (!receive.matched()) {
      impl.messenger().progressIfIdle();
      FW_RETURN_IF_ERROR(impl.pointToPoint().matchAnySource(&receive));
      if (!receive.matched()) {
        *finished = false;
        return Status::ok();
      }
    }
    message = &receive.message;
  }
  FW_RETURN_IF_ERROR(impl.messenger().test(message, finished));
  if (*finished) reportSource(request);
  return Status::ok();
}

Status testRequest(RequestState& request, bool* finished) {
  if (request.operation) {
    *finished = request.operation->isDone();
    return *finished ? request.operation->wait() : Status::ok();
  }
  Communicator* impl = nullptr;
  FW_RETURN_IF_ERROR(communicatorOf(request, &impl));
  return testMessage(*impl, request, finished);
}

Status waitRequest(RequestState& request) {
  if (request.operation) return request.operation->wait();
  Communicator* impl = nullptr;
  FW_RETURN_IF_ERROR(communicatorOf(request, &impl));
  if (request.anySource) {
    FW_RETURN_IF_ERROR(impl->pointToPoint().waitAnySource(request.anySource.get()));
  } else {
    FW_RETURN_IF_ERROR(impl->messenger().wait(&request.message));
  }
  reportSource(request);
  return Status::ok();
}

// The notification a completion owes, run once the claim is dropped.
struct Notification {
  fwCompletionFn_t fn = nullptr;
  void* arg = nullptr;
  Status outcome;
  void run(const std::string& context) const {
    if (fn == nullptr) return;
    const fwResult_t result = reportToCaller(outcome.withContext(context));  // what fwGetLastErrorMessage says inside fn
    fn(result, arg);
  }
};

// Under the claim: the request is complete with outcome.
Notification finishLocked(RequestState& request, const Status& outcome) {
  request.finished = true;
  request.outcome = outcome;
  Communicator* impl = nullptr;
  if (request.traceId != ~uint64_t{0} && lookupComm(request.comm, &impl).isOk()) {
    impl->traceEnded(request.traceId, outcome, request.bytes);
  }
  Notification owed{request.notify, request.notifyArg, outcome};
  request.notify = nullptr;
  return owed;
}

// Completion on a Fairway thread: the request is released here once its
// notification has returned (a fwWait that got there first has released
// it already), so a caller that learns from the notification that the
// request is done never finds its handle gone before then.
void finishFromFairway(RequestState& request, const Status& outcome, std::unique_lock<std::mutex> claim) {
  if (request.finished) return;
  const Notification owed = finishLocked(request, outcome);
  request.finishedByFairway = true;
  claim.unlock();
  owed.run(request.what);
  (void)releaseRequest(request.handle);
}

// A message with a notification, polled by its communicator's progress thread.
class RequestWatch final : public ProgressWatch {
 public:
  RequestWatch(Communicator& impl, std::shared_ptr<RequestState> request)
      : impl_(impl), request_(std::move(request)) {}

  bool poll() override {
    std::unique_lock<std::mutex> claim(request_->claim, std::try_to_lock);
    if (!claim.owns_lock()) return false;  // a caller is completing it; seen done next time
    if (request_->finished) return true;
    bool finished = false;
    const Status st = testMessage(impl_, *request_, &finished);
    if (st.isOk() && !finished) return false;
    finishFromFairway(*request_, st, std::move(claim));
    return true;
  }
  // The messenger is closing: the message is cancelled, so nothing lands
  // in the caller's buffer later.
  void abandon(const Status& why) override {
    std::unique_lock<std::mutex> claim(request_->claim);
    if (request_->finished) return;
    Pending* message = &request_->message;
    if (request_->anySource) message = request_->anySource->matched() ? &request_->anySource->message : nullptr;
    if (message != nullptr && !message->done) impl_.messenger().cancel(message, 1);
    finishFromFairway(*request_, why, std::move(claim));
  }

 private:
  Communicator& impl_;  // outlives the watch: its messenger abandons watches before it goes
  std::shared_ptr<RequestState> request_;
};

}  // namespace

extern "C" {

fwResult_t fwTest(fwRequest_t request, int* done) {
  if (done == nullptr) return reportToCaller(Status(fwInvalidPointer, "fwTest: done is NULL"));
  *done = 0;
  std::shared_ptr<RequestState> state;
  Status st = lookupRequest(request, &state);
  if (!st.isOk()) return reportToCaller(st.withContext("fwTest"));
  Notification owed;
  {
    std::lock_guard<std::mutex> claim(state->claim);
    if (state->finished) {
      st = state->outcome;  // completed by a Fairway thread since the lookup
    } else {
      bool finished = false;
      st = testRequest(*state, &finished);
      if (st.isOk() && !finished) return fwSuccess;
      // Complete, or failed: either way the request ends here, released once.
      (void)releaseRequest(request);
      owed = finishLocked(*state, st);
    }
  }
  *done = 1;
  const std::string context = std::string("fwTest: ") + state->what;
  owed.run(context);
  return reportToCaller(st.withContext(context));
}

fwResult_t fwWait(fwRequest_t request) {
  std::shared_ptr<RequestState> state;
  Status st = lookupRequest(request, &state);
  if (!st.isOk()) return reportToCaller(st.withContext("fwWait"));
  // Taken out before waiting, so a second fwWait on it is refused at once.
  st = releaseRequest(request);
  if (!st.isOk()) {
    // A Fairway thread completing the request for its notification took it
    // out since the lookup: this wait began on a live request, and has its
    // result (as a fwTest that finds it finished does).
    std::lock_guard<std::mutex> claim(state->claim);
    if (!state->finishedByFairway) return reportToCaller(st.withContext("fwWait"));
    return reportToCaller(state->outcome.withContext(std::string("fwWait: ") + state->what));
  }
  Notification owed;
  {
    std::lock_guard<std::mutex> claim(state->claim);
    if (state->finished) {
      st = state->outcome;  // a Fairway thread completed it meanwhile
    } else {
      st = waitRequest(*state);
      owed = finishLocked(*state, st);
    }
  }
  const std::string context = std::string("fwWait: ") + state->what;
  owed.run(context);
  return reportToCaller(st.withContext(context));
}

fwResult_t fwRequestOnComplete(fwRequest_t request, fwCompletionFn_t fn, void* arg) {
  if (fn == nullptr) return reportToCaller(Status(fwInvalidPointer, "fwRequestOnComplete: fn is NULL"));
  std::shared_ptr<RequestState> state;
  Status st = lookupRequest(request, &state);
  if (!st.isOk()) return reportToCaller(st.withContext("fwRequestOnComplete"));
  Communicator* impl = nullptr;
  if (!state->operation) {
    st = communicatorOf(*state, &impl);
    if (!st.isOk()) return reportToCaller(st.withContext("fwRequestOnComplete"));
  }
  Notification now;
  {
    std::lock_guard<std::mutex> claim(state->claim);
    if (state->notify != nullptr) {
      return reportToCaller(Status(fwInvalidUsage, "fwRequestOnComplete: the request already has a notification"));
    }
    if (state->finished) {
      now = Notification{fn, arg, state->outcome};  // completed since the lookup
    } else {
      state->notify = fn;
      state->notifyArg = arg;
    }
  }
  if (now.fn != nullptr) {
    now.run(state->what);
    return fwSuccess;
  }
  if (state->operation) {
    // The worker never waits for the claim: whoever holds it (a fwWait or
    // fwTest) sees the operation done, completes the request and tells, and
    // the worker goes straight on to the next collective.
    state->operation->whenDone([state](const Status& result) {
      std::unique_lock<std::mutex> claim(state->claim, std::try_to_lock);
      if (claim.owns_lock()) finishFromFairway(*state, result, std::move(claim));
    });
  } else {
    impl->messenger().watch(std::make_shared<RequestWatch>(*impl, state));
  }
  return fwSuccess;
}

}  // extern "C"
