// C entry points that survive a lost rank: fwCommRevoke,
// fwCommGetFailedRanks and fwCommShrink (docs/recovery.md).
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "api/handles.h"
#include "core/errors.h"

using namespace fairway;

namespace {

Status checkShrinkArguments(const Communicator& impl, const int* excludeRanks, int excludeCount, int flags,
                            std::vector<int>* exclude) {
  if (excludeCount < 0) return Status(fwInvalidArgument, "excludeCount " + std::to_string(excludeCount) + " is negative");
  if (excludeCount > 0 && excludeRanks == nullptr) {
    return Status(fwInvalidPointer, "excludeRanks is NULL with excludeCount " + std::to_string(excludeCount));
  }
  if ((flags & ~FAIRWAY_SHRINK_ABORT) != 0) {
    return Status(fwInvalidArgument, "flags " + std::to_string(flags) +
                                         ": only FAIRWAY_SHRINK_DEFAULT and FAIRWAY_SHRINK_ABORT are defined");
  }
  std::set<int> seen;
  for (int i = 0; i < excludeCount; ++i) {
    const int r = excludeRanks[i];
    if (r < 0 || r >= impl.size()) {
      return Status(fwInvalidRank, "excludeRanks[" + std::to_string(i) + "] = " + std::to_string(r) +
                                       " is not a rank of this communicator of " + std::to_string(impl.size()));
    }
    if (r == impl.rank()) {
      return Status(fwInvalidArgument, "rank " + std::to_string(r) +
                                           " excludes itself: only the ranks that stay call fwCommShrink");
    }
    if (!seen.insert(r).second) {
      return Status(fwInvalidArgument, "excludeRanks names rank " + std::to_string(r) + " twice");
    }
  }
  exclude->assign(seen.begin(), seen.end());
  if (static_cast<int>(exclude->size()) >= impl.size()) {
    return Status(fwInvalidArgument, "excludeRanks leaves no rank");
  }
  return Status::ok();
}

}  // namespace

extern "C" {

fwResult_t fwCommRevoke(fwComm_t comm) {
  Communicator* impl = nullptr;
  Status st = lookupComm(comm, &impl);
  if (st.isOk()) impl->revoke();
  return reportToCaller(st.withContext("fwCommRevoke"));
}

fwResult_t fwCommGetFailedRanks(fwComm_t comm, int* failedRanks, int capacity, int* count) {
  Communicator* impl = nullptr;
  Status st = lookupComm(comm, &impl);
  if (st.isOk() && count == nullptr) st = Status(fwInvalidPointer, "count is NULL");
  if (st.isOk() && capacity < 0) st = Status(fwInvalidArgument, "capacity " + std::to_string(capacity) + " is negative");
  if (st.isOk() && capacity > 0 && failedRanks == nullptr) {
    st = Status(fwInvalidPointer, "failedRanks is NULL with capacity " + std::to_string(capacity));
  }
  if (st.isOk()) {
    const std::vector<int> failed = impl->failedRanks();
    *count = static_cast<int>(failed.size());
    for (int i = 0; i < capacity && i < *count; ++i) failedRanks[i] = failed[i];
  }
  return reportToCaller(st.withContext("fwCommGetFailedRanks"));
}

fwResult_t fwCommShrink(fwComm_t comm, const int* excludeRanks, int excludeCount, int flags, fwComm_t* newcomm) {
  if (newcomm == nullptr) return reportToCaller(Status(fwInvalidPointer, "fwCommShrink: newcomm is NULL"));
  *newcomm = nullptr;
  Communicator* impl = nullptr;
  Status st = lookupComm(comm, &impl);
  std::vector<int> exclude;
  if (st.isOk()) st = checkShrinkArguments(*impl, excludeRanks, excludeCount, flags, &exclude);
  std::unique_ptr<Communicator> shrunk;
  if (st.isOk()) st = impl->shrink(exclude, flags, &shrunk);
  if (st.isOk()) *newcomm = registerComm(std::move(shrunk));
  return reportToCaller(st.withContext("fwCommShrink"));
}

}  // extern "C"
