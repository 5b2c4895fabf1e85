// The objects behind fwComm_t and fwRequest_t. A handle is a number drawn
// from one counter that is never reused, not an address: a destroyed,
// released, forged or mixed-up handle finds nothing in its registry and is
// refused with a message, never followed into freed memory.
#pragma once

#include <memory>
#include <mutex>

#include "collective/collective_args.h"
#include "comm/communicator.h"

namespace fairway {

// What a request handle stands for: a queued collective, a posted
// send/recv, or a receive from any source not yet matched, on its communicator.
struct RequestState {
  fwComm_t comm = nullptr;
  const char* what = "";                          // the call that made it, for messages
  std::shared_ptr<AsyncOperation> operation;      // a collective
  Pending message;                                // or a send/recv
  std::unique_ptr<AnySourceReceive> anySource;    // or a receive from any source
  int* source = nullptr;                          // a receive's caller's place for the sender, or null
  uint64_t traceId = ~uint64_t{0};                // a message's entry in its communicator's flight record
  size_t bytes = 0;                               // a message's

  // Completion happens once: in the fwWait or fwTest that completes the
  // request, or on a Fairway thread when the request has a notification
  // (api_requests.cc). Whoever completes it holds `claim`.
  fwRequest_t handle = nullptr;
  std::mutex claim;
  bool finished = false;  // under claim
  bool finishedByFairway = false;  // under claim: by a Fairway thread, for its notification
  Status outcome;         // under claim, once finished
  fwCompletionFn_t notify = nullptr;  // under claim
  void* notifyArg = nullptr;
};

fwComm_t registerComm(std::unique_ptr<Communicator> impl);
// The communicator behind handle, or fwInvalidComm naming why not.
Status lookupComm(fwComm_t handle, Communicator** out);
// Removes handle from the registry and frees its communicator.
void unregisterComm(fwComm_t handle);

fwRequest_t registerRequest(std::shared_ptr<RequestState> state);
// The live request behind handle, or fwInvalidArgument naming why not.
Status lookupRequest(fwRequest_t handle, std::shared_ptr<RequestState>* out);
// Takes the request out of the registry: of callers racing to release one
// request, exactly one succeeds; the others get fwInvalidArgument.
Status releaseRequest(fwRequest_t handle);

}  // namespace fairway
