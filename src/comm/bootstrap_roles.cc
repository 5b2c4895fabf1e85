#include "comm/bootstrap_roles.h"

#include <cstring>
#include <string>

namespace fairway {
namespace {

constexpr char kMagic[4] = {'F', 'W', 'R', '1'};
constexpr size_t kRecordBytes = sizeof(kMagic) + 1 + 4;

Status decode(const std::vector<uint8_t>& record, int rank, BootstrapRole* role) {
  if (record.size() != kRecordBytes || std::memcmp(record.data(), kMagic, sizeof(kMagic)) != 0 ||
      record[4] > BootstrapRole::kGrowJoiner) {
    return Status(fwInvalidUsage, "rank " + std::to_string(rank) +
                                      " sent no formation role: it runs another version of Fairway");
  }
  role->kind = static_cast<BootstrapRole::Kind>(record[4]);
  std::memcpy(&role->grownSize, record.data() + 5, 4);
  return Status::ok();
}

const char* callOf(BootstrapRole::Kind kind) {
  switch (kind) {
    case BootstrapRole::kInit: return "fwCommInitRank";
    case BootstrapRole::kGrowMember: return "fwCommGrow as a member";
    default: return "fwCommGrow as a joining process";
  }
}

}  // namespace

std::vector<uint8_t> BootstrapRole::encode() const {
  std::vector<uint8_t> out(kRecordBytes);
  std::memcpy(out.data(), kMagic, sizeof(kMagic));
  out[4] = kind;
  std::memcpy(out.data() + 5, &grownSize, 4);
  return out;
}

Status checkBootstrapRoles(const std::vector<std::vector<uint8_t>>& records) {
  const int n = static_cast<int>(records.size());
  std::vector<BootstrapRole> roles(n);
  bool anyInit = false, anyGrow = false;
  int firstInit = -1, firstGrow = -1;
  for (int r = 0; r < n; ++r) {
    FW_RETURN_IF_ERROR(decode(records[r], r, &roles[r]));
    if (roles[r].kind == BootstrapRole::kInit) {
      if (!anyInit) firstInit = r;
      anyInit = true;
    } else {
      if (!anyGrow) firstGrow = r;
      anyGrow = true;
    }
  }
  if (anyInit && anyGrow) {
    return Status(fwInvalidUsage, "rank " + std::to_string(firstInit) + " called fwCommInitRank while rank " +
                                      std::to_string(firstGrow) + " called " + callOf(roles[firstGrow].kind) +
                                      " with the same id: a grow id serves fwCommGrow only");
  }
  if (!anyGrow) return Status::ok();
  // Members keep their ranks, so ranks 0..k-1 must be the k members.
  int members = 0;
  while (members < n && roles[members].kind == BootstrapRole::kGrowMember) ++members;
  if (members == 0) {
    return Status(fwInvalidUsage, "rank 0 joins as a new process, but ranks 0 to k-1 of a grown communicator are "
                                  "the k members of the one grown: no member of it called fwCommGrow with this id");
  }
  for (int r = 0; r < n; ++r) {
    const BootstrapRole& role = roles[r];
    if (role.kind == BootstrapRole::kGrowMember && role.grownSize != roles[0].grownSize) {
      return Status(fwInvalidUsage, "ranks 0 and " + std::to_string(r) + " grow communicators of " +
                                        std::to_string(roles[0].grownSize) + " and " +
                                        std::to_string(role.grownSize) + " ranks with the same id");
    }
    if (role.kind == BootstrapRole::kGrowMember && r >= members) {
      return Status(fwInvalidUsage, "member rank " + std::to_string(r) + " comes after joining rank " +
                                        std::to_string(members) + ": joining processes take ranks from " +
                                        std::to_string(roles[0].grownSize));
    }
  }
  if (members != roles[0].grownSize) {
    return Status(fwInvalidUsage, "rank " + std::to_string(members) + " joins as a new process, but it is rank " +
                                      std::to_string(members) + " of the grown communicator of " +
                                      std::to_string(roles[0].grownSize) +
                                      " ranks: joining processes take ranks from " +
                                      std::to_string(roles[0].grownSize) + " to " + std::to_string(n - 1));
  }
  return Status::ok();
}

}  // namespace fairway
