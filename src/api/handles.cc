#include "api/handles.h"

#include <mutex>
#include <unordered_set>

namespace fairway {
namespace {

std::mutex& registryMutex() {
  static std::mutex m;
  return m;
}
std::unordered_set<fwComm_t>& registry() {
  static auto* set = new std::unordered_set<fwComm_t>();  // never destroyed: safe at exit
  return *set;
}

}  // namespace

fwComm_t registerComm(std::unique_ptr<Communicator> impl) {
  auto* handle = new fwComm{std::move(impl)};
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().insert(handle);
  return handle;
}

Status lookupComm(fwComm_t handle, Communicator** out) {
  if (handle == nullptr) return Status(fwInvalidComm, "comm is NULL");
  std::lock_guard<std::mutex> lock(registryMutex());
  if (registry().count(handle) == 0) {
    return Status(fwInvalidComm, "comm is not a live communicator (destroyed, aborted, or never created)");
  }
  *out = handle->impl.get();
  return Status::ok();
}

void unregisterComm(fwComm_t handle) {
  {
    std::lock_guard<std::mutex> lock(registryMutex());
    registry().erase(handle);
  }
  delete handle;
}

}  // namespace fairway
