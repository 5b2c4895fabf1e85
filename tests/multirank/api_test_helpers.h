// What the C API's multi-rank tests share: every rank's exit checked, and
// a communicator made before a test's body and destroyed after it.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <vector>

#include "tests/multirank/rank_harness.h"

namespace fairway::testing {

inline void expectAllSucceeded(const std::vector<RankOutcome>& outcomes) {
  for (size_t r = 0; r < outcomes.size(); ++r) EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
}

// split: even and odd ranks pose as two nodes (interleaved), so half the
// traffic crosses UCX's network transports.
inline void poseAsNodes(const RankContext& ctx, bool split) {
  if (split) setenv("FAIRWAY_NODE_ID", ctx.rank % 2 ? "odd" : "even", 1);
}

// Runs body(ctx, comm) on nranks ranks, with a communicator made before and
// destroyed after; body returns its failures.
inline void runWithComm(int nranks, bool split, const std::function<int(const RankContext&, fwComm_t)>& body) {
  expectAllSucceeded(runRanks(nranks, [&](const RankContext& ctx) {
    int failures = 0;
    poseAsNodes(ctx, split);
    fwComm_t comm;
    RANK_CHECK(ctx, fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) == fwSuccess, "init");
    if (failures) return failures;
    failures += body(ctx, comm);
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    return failures;
  }));
}

}  // namespace fairway::testing
