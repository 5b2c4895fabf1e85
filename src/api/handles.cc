#include "api/handles.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace fairway {
namespace {

std::mutex& registryMutex() {
  static std::mutex m;
  return m;
}

// Both registries draw from one counter, so a communicator handle passed
// where a request belongs (or the reverse) finds nothing.
uint64_t nextHandleNumber() {
  static uint64_t next = 1;
  return next++;
}

// Never destroyed: handles stay checkable while static destructors run at exit.
std::unordered_map<uint64_t, std::unique_ptr<Communicator>>& comms() {
  static auto* map = new std::unordered_map<uint64_t, std::unique_ptr<Communicator>>();
  return *map;
}
std::unordered_map<uint64_t, std::shared_ptr<RequestState>>& requests() {
  static auto* map = new std::unordered_map<uint64_t, std::shared_ptr<RequestState>>();
  return *map;
}

// Counts communicators taken out of the registry (written under the lock).
// A thread remembers its last lookup with the count it saw: every
// collective call looks its communicator up, and while nothing has left
// the registry the remembered answer stands without the lock and the map.
std::atomic<uint64_t> commRemovals{0};
struct RememberedComm {
  uint64_t number = 0;  // no handle has number 0
  uint64_t removals = 0;
  Communicator* impl = nullptr;
};
thread_local RememberedComm remembered;

template <typename Handle>
uint64_t numberOf(Handle handle) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle)); }
template <typename Handle>
Handle handleOf(uint64_t number) { return reinterpret_cast<Handle>(static_cast<uintptr_t>(number)); }

}  // namespace

fwComm_t registerComm(std::unique_ptr<Communicator> impl) {
  std::lock_guard<std::mutex> lock(registryMutex());
  uint64_t number = nextHandleNumber();
  comms().emplace(number, std::move(impl));
  return handleOf<fwComm_t>(number);
}

Status lookupComm(fwComm_t handle, Communicator** out) {
  if (handle == nullptr) return Status(fwInvalidComm, "comm is NULL");
  const uint64_t number = numberOf(handle);
  if (remembered.number == number && remembered.removals == commRemovals.load(std::memory_order_acquire)) {
    *out = remembered.impl;
    return Status::ok();
  }
  std::lock_guard<std::mutex> lock(registryMutex());
  auto it = comms().find(number);
  if (it == comms().end()) {
    return Status(fwInvalidComm, "comm is not a live communicator (destroyed, aborted, or never created)");
  }
  *out = it->second.get();
  remembered = RememberedComm{number, commRemovals.load(std::memory_order_relaxed), *out};
  return Status::ok();
}

void unregisterComm(fwComm_t handle) {
  std::unique_ptr<Communicator> gone;
  {
    std::lock_guard<std::mutex> lock(registryMutex());
    auto it = comms().find(numberOf(handle));
    if (it == comms().end()) return;
    gone = std::move(it->second);
    comms().erase(it);
    commRemovals.fetch_add(1, std::memory_order_release);
  }
  // Freed outside the lock: closing a communicator can take a while.
}

fwRequest_t registerRequest(std::shared_ptr<RequestState> state) {
  std::lock_guard<std::mutex> lock(registryMutex());
  uint64_t number = nextHandleNumber();
  state->handle = handleOf<fwRequest_t>(number);
  requests().emplace(number, std::move(state));
  return handleOf<fwRequest_t>(number);
}

Status lookupRequest(fwRequest_t handle, std::shared_ptr<RequestState>* out) {
  if (handle == nullptr) return Status(fwInvalidPointer, "request is NULL");
  std::lock_guard<std::mutex> lock(registryMutex());
  auto it = requests().find(numberOf(handle));
  if (it == requests().end()) {
    return Status(fwInvalidArgument,
                  "request is not a live request (already completed by fwWait or fwTest, or never created)");
  }
  *out = it->second;
  return Status::ok();
}

Status releaseRequest(fwRequest_t handle) {
  std::lock_guard<std::mutex> lock(registryMutex());
  if (requests().erase(numberOf(handle)) == 0) {
    return Status(fwInvalidArgument, "request was completed by another fwWait or fwTest at the same time");
  }
  return Status::ok();
}

}  // namespace fairway
