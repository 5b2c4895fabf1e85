// dist._reconfigure: a group re-formed with a new membership. A handle is
// "fairway-reconfigure:1:" and the hex of a unique id whose bootstrap root
// its process serves; the first handle's root forms the new communicator
// and the others' ids are released at once (fwReleaseUniqueId), so no
// offered root keeps its thread and port.
#include "fairway_backend.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <variant>

#include <c10/util/Exception.h>

namespace fairway_torch {

#ifdef C10D_BACKEND_HAS_RECONFIGURE

namespace {

constexpr const char* kHandlePrefix = "fairway-reconfigure:1:";

std::string handleOf(const fwUniqueId& id) {
  static const char* digits = "0123456789abcdef";
  std::string out(kHandlePrefix);
  for (unsigned char byte : id.internal) {
    out += digits[byte >> 4];
    out += digits[byte & 0xf];
  }
  return out;
}

int nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

fwUniqueId idOf(const std::string& handle, size_t position) {
  const size_t prefix = std::strlen(kHandlePrefix);
  TORCH_CHECK_VALUE(handle.size() == prefix + 2 * sizeof(fwUniqueId::internal) &&
                        handle.compare(0, prefix, kHandlePrefix) == 0,
                    "fairway: reconfigure handle ", position,
                    " is not a fairway handle (get_reconfigure_handle of a fairway group makes them)");
  fwUniqueId id;
  for (size_t i = 0; i < sizeof(id.internal); ++i) {
    const int hi = nibble(handle[prefix + 2 * i]), lo = nibble(handle[prefix + 2 * i + 1]);
    TORCH_CHECK_VALUE(hi >= 0 && lo >= 0, "fairway: reconfigure handle ", position, " is not hexadecimal");
    id.internal[i] = static_cast<char>(hi << 4 | lo);
  }
  return id;
}

bool sameId(const fwUniqueId& a, const fwUniqueId& b) {
  return std::memcmp(a.internal, b.internal, sizeof(a.internal)) == 0;
}

// The members in rank order: a list as given, a set sorted (the same on every process).
std::vector<std::string> membersOf(const c10d::ReconfigureOptions& opts) {
  std::vector<std::string> members;
  if (const auto* list = std::get_if<std::vector<c10d::ReconfigureHandle>>(&opts.handles)) {
    members = *list;
  } else {
    const auto& set = std::get<std::unordered_set<c10d::ReconfigureHandle>>(opts.handles);
    members.assign(set.begin(), set.end());
    std::sort(members.begin(), members.end());
  }
  return members;
}

}  // namespace

c10d::ReconfigureHandle FairwayBackend::get_reconfigure_handle() const {
  fwUniqueId id;
  const fwResult_t made = fwGetUniqueId(&id);
  if (made != fwSuccess) throwFairwayError(made, "making a reconfigure handle");
  std::lock_guard<std::mutex> lock(offeredMutex_);
  offered_.push_back(id);
  return handleOf(id);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::reconfigure(const c10d::ReconfigureOptions& opts) {
  const std::vector<std::string> members = membersOf(opts);
  TORCH_CHECK_VALUE(!members.empty(), "fairway: reconfigure with no handles");
  TORCH_CHECK_VALUE(std::find(usedUuids_.begin(), usedUuids_.end(), opts.uuid) == usedUuids_.end(),
                    "fairway: reconfigure uuid ", opts.uuid, " was used before on this group: pass a fresh one");
  std::vector<fwUniqueId> ids;
  std::unordered_map<std::string, size_t> positions;
  for (size_t i = 0; i < members.size(); ++i) {
    ids.push_back(idOf(members[i], i));
    const auto placed = positions.emplace(members[i], i);
    TORCH_CHECK_VALUE(placed.second, "fairway: reconfigure handles ", placed.first->second, " and ", i,
                      " are the same");
  }
  // Every handle given out so far is spent by this call: each takes part
  // here or in no formation at all, so the unused ones are released
  // before anything below can refuse the call.
  std::vector<fwUniqueId> offered;
  {
    std::lock_guard<std::mutex> lock(offeredMutex_);
    offered.swap(offered_);
  }
  for (const fwUniqueId& mine : offered) {
    if (!sameId(mine, ids[0])) (void)fwReleaseUniqueId(mine);
  }
  int rank = -1;
  for (const fwUniqueId& mine : offered) {
    const auto found = positions.find(handleOf(mine));
    if (found == positions.end()) continue;
    TORCH_CHECK_VALUE(rank < 0, "fairway: reconfigure handles ", rank, " and ", found->second,
                      " are both this process's");
    rank = static_cast<int>(found->second);
  }
  TORCH_CHECK_VALUE(rank >= 0, "fairway: none of the ", members.size(),
                    " reconfigure handles is this process's: pass the one get_reconfigure_handle returned here");
  usedUuids_.push_back(opts.uuid);

  fwConfig_t config = FW_CONFIG_INITIALIZER;
  config.timeoutMs = std::max<long long>(1, opts.timeout.value_or(timeout_).count());
  fwComm_t formed = nullptr;
  const fwResult_t result = fwCommInitRankConfig(&formed, static_cast<int>(members.size()), ids[0], rank, &config);
  if (result != fwSuccess) {
    throwFairwayError(result, "reconfiguring the group as rank " + std::to_string(rank) + " of " +
                                  std::to_string(members.size()) + " (uuid " + std::to_string(opts.uuid) + ")");
  }
  fwComm_t old = nullptr;
  {
    std::lock_guard<std::mutex> lock(callMutex_);
    old = comm_;
    comm_ = formed;
    rank_ = rank;
    size_ = static_cast<int>(members.size());
    awaitingReconfigure_ = false;
    collectives_ = 0;
  }
  // The old group's calls still pending fail at once (revoked) and their
  // Works finish before the old communicator goes.
  if (old != nullptr) {
    (void)fwCommRevoke(old);
    completions_.stop();
    (void)fwCommAbort(old);
  }
  return completedWork(c10d::OpType::UNKNOWN, {}, {});
}

#endif  // C10D_BACKEND_HAS_RECONFIGURE

}  // namespace fairway_torch
