// Why a process forms a communicator through the bootstrap: a plain
// fwCommInitRank, or fwCommGrow as a member of the communicator being grown
// or as a process joining it. Every formation's first exchange carries each
// rank's role, so a process that came for another purpose is refused on
// every rank, with the same words, before any connection is made.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace fairway {

struct BootstrapRole {
  enum Kind : uint8_t { kInit = 0, kGrowMember = 1, kGrowJoiner = 2 };
  Kind kind = kInit;
  int32_t grownSize = 0;  // a member's: the size of the communicator it grows

  static BootstrapRole init() { return {}; }
  static BootstrapRole member(int grownSize) { return {kGrowMember, grownSize}; }
  static BootstrapRole joiner() { return {kGrowJoiner, 0}; }

  std::vector<uint8_t> encode() const;
};

// The roles every rank sent, indexed by rank: fine when all ranks init, or
// when ranks 0..k-1 are members of one communicator of size k and the
// others join; otherwise an fwInvalidUsage naming the ranks that differ.
Status checkBootstrapRoles(const std::vector<std::vector<uint8_t>>& records);

}  // namespace fairway
