// One rank's part of the correctness sweep: every datatype x every op that
// applies x counts {0, 1, 7, 1K+3, large} x out-of-place and in-place for one
// collective, each result compared element by element with the reference
// (exact for integers, within check_data's tolerance for floats), guard
// bytes checked, and out-of-place send buffers required unchanged. The
// large count runs with sum and one other op per type (collective_sweep.cc).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tests/multirank/collective_cases.h"
#include "tests/multirank/rank_harness.h"

namespace fairway::testing {

struct SweepOptions {
  // FAIRWAY_NODE_ID of each rank, to pose as several nodes (empty: one node).
  std::vector<std::string> nodeOfRank;
  // Buffers from fwMemAlloc, passed with `stream`; the sweep waits with
  // `synchronize` before checking, through host mirrors (GuardedBuffer), so
  // it runs on a GPU and under the host-emulated runtime alike. Non-blocking
  // calls take host buffers only, so device sweeps make blocking calls.
  bool deviceMemory = false;
  fwStream_t stream = nullptr;
  int (*synchronize)(fwStream_t stream) = nullptr;
  // The types swept (empty: every type but the 8-bit floats, which have a
  // sweep of their own).
  std::vector<fwDataType_t> types;
};

// The sweep's largest count: 1M+3 elements, spanning many pipeline
// segments, unless FAIRWAY_TEST_SWEEP_LARGE_COUNT makes it smaller
// (scripts/sanitize.sh).
size_t sweepLargeCount();

// Creates a communicator, runs the sweep of c, destroys it; returns the
// number of failures (each reported).
int sweepCollective(const RankContext& ctx, const CollectiveCase& c, const SweepOptions& options = {});

}  // namespace fairway::testing
