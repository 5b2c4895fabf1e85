// Every collective x every datatype x every op that applies x counts
// {0, 1, 7, 1M+3} x out-of-place and in-place, on 1, 2, 3, 4 and 8 ranks
// as forked processes over real UCX. Results are compared element by
// element with a reference computed here (exact for integers, within the
// tolerance check_data states for floats); guard bytes catch writes past
// a buffer, and out-of-place send buffers must come back unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "perf/check_data.h"
#include "tests/multirank/collective_cases.h"
#include "tests/multirank/rank_harness.h"

namespace fairway::testing {
namespace {

const fwDataType_t kTypes[] = {fwInt8, fwUint8, fwInt32, fwUint32, fwInt64, fwUint64,
                               fwFloat16, fwBfloat16, fwFloat32, fwFloat64};
// The last count spans many pipeline segments; sanitizer runs shrink it
// with FAIRWAY_TEST_SWEEP_LARGE_COUNT (scripts/sanitize.sh).
size_t largeCount() {
  const char* text = std::getenv("FAIRWAY_TEST_SWEEP_LARGE_COUNT");
  long long n = text ? std::atoll(text) : 0;
  return n > 7 ? static_cast<size_t>(n) : (1u << 20) + 3;
}
const size_t kCounts[] = {0, 1, 7, largeCount()};
const char* kTypeNames[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "bfloat16", "float", "double"};
const char* kOpNames[] = {"sum", "prod", "max", "min", "avg", "band", "bor", "bxor"};

std::vector<fwRedOp_t> opsFor(const CollectiveCase& c, fwDataType_t type) {
  if (!c.reduces) return {fwSum};
  std::vector<fwRedOp_t> ops = {fwSum, fwProd, fwMax, fwMin, fwAvg};
  if (type <= fwUint64) ops.insert(ops.end(), {fwBand, fwBor, fwBxor});
  return ops;
}

struct Combination {
  fwDataType_t type;
  fwRedOp_t op;
  size_t count;
  bool inPlace;
  bool nonBlocking;
  int root;
  std::string describe(const char* name) const {
    return std::string(name) + " " + kTypeNames[type] + " " + kOpNames[op] + " count " + std::to_string(count) +
           (inPlace ? " in-place" : " out-of-place") + (nonBlocking ? " non-blocking" : "") + " root " +
           std::to_string(root);
  }
};

// Runs one combination on this rank; returns its failure count.
int runOne(const RankContext& ctx, fwComm_t comm, const CollectiveCase& c, const Combination& k, int seed) {
  const size_t es = check::elementSize(k.type);
  const size_t sendN = c.sendElements(k.count, ctx.nranks, ctx.rank, k.root);
  const size_t recvN = c.recvElements(k.count, ctx.nranks, ctx.rank, k.root);
  CallArgs a{nullptr, nullptr, k.count, k.type, k.op, k.root, ctx.rank, ctx.nranks, comm};

  // In place only where this rank holds both buffers (rooted calls: the root).
  const bool shared = k.inPlace && (!c.rooted || ctx.rank == k.root);
  GuardedBuffer one(std::max(sendN, recvN) * es);
  GuardedBuffer other(shared ? 0 : recvN * es);
  std::memset(one.data(), 0xCD, one.size());
  std::memset(other.data(), 0xCD, other.size());
  if (shared) {
    size_t sendOffset = 0, recvOffset = 0;
    c.inPlaceOffsets(k.count, ctx.rank, k.root, &sendOffset, &recvOffset);
    a.send = static_cast<char*>(one.data()) + sendOffset * es;
    a.recv = static_cast<char*>(one.data()) + recvOffset * es;
  } else {
    a.send = sendN ? one.data() : nullptr;
    a.recv = recvN ? other.data() : nullptr;
  }
  if (sendN) c.fillInput(const_cast<void*>(a.send), a, seed);
  std::vector<char> sentCopy;
  if (!shared && sendN) sentCopy.assign(static_cast<const char*>(a.send), static_cast<const char*>(a.send) + sendN * es);

  fwResult_t result;
  if (k.nonBlocking) {
    fwRequest_t request = nullptr;
    result = c.call(a, &request);
    if (result == fwSuccess) result = fwWait(request);
  } else {
    result = c.call(a, nullptr);
  }
  if (result != fwSuccess) {
    reportFailure(ctx, k.describe(c.name) + ": " + fwGetErrorString(result) + ": " + fwGetLastErrorMessage());
    return 1;
  }
  int failures = 0;
  std::vector<char> expected(std::max<size_t>(recvN, 1) * es);
  size_t compare = c.fillExpected(expected.data(), a, seed);
  size_t wrong = compare ? check::countWrong(a.recv, expected.data(), k.type, compare) : 0;
  if (wrong) {
    reportFailure(ctx, k.describe(c.name) + ": " + std::to_string(wrong) + " of " + std::to_string(compare) +
                           " elements wrong");
    ++failures;
  }
  if (!one.guardsIntact() || !other.guardsIntact()) {
    reportFailure(ctx, k.describe(c.name) + ": wrote past the end of a buffer");
    ++failures;
  }
  if (!sentCopy.empty() && std::memcmp(sentCopy.data(), a.send, sentCopy.size()) != 0) {
    reportFailure(ctx, k.describe(c.name) + ": modified the send buffer");
    ++failures;
  }
  return failures;
}

// nodeOfRank: FAIRWAY_NODE_ID for each rank, to pose as several nodes
// (empty: one node).
int sweepCollective(const RankContext& ctx, const CollectiveCase& c, const std::vector<std::string>& nodeOfRank = {}) {
  if (c.algorithm != nullptr) setenv("FAIRWAY_ALGO", c.algorithm, 1);  // this rank's process only
  if (!nodeOfRank.empty()) setenv("FAIRWAY_NODE_ID", nodeOfRank[ctx.rank].c_str(), 1);
  fwComm_t comm = nullptr;
  if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) {
    reportFailure(ctx, std::string("fwCommInitRank: ") + fwGetLastErrorMessage());
    return 1;
  }
  int failures = 0;
  int seed = 0;
  for (fwDataType_t type : kTypes) {
    for (fwRedOp_t op : opsFor(c, type)) {
      for (size_t countIndex = 0; countIndex < 4; ++countIndex) {
        for (bool inPlace : {false, true}) {
          if (inPlace && !c.hasInPlace) continue;
          ++seed;
          // Roots and the non-blocking path vary across combinations.
          Combination k{type, op, kCounts[countIndex], inPlace, seed % 3 == 0,
                        static_cast<int>((seed / 2) % ctx.nranks)};
          failures += runOne(ctx, comm, c, k, seed);
        }
      }
    }
  }
  if (fwCommDestroy(comm) != fwSuccess) {
    reportFailure(ctx, std::string("fwCommDestroy: ") + fwGetLastErrorMessage());
    ++failures;
  }
  return failures;
}

class CollectiveSweep : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(CollectiveSweep, MatchesReference) {
  const CollectiveCase& c = collectiveCases()[std::get<0>(GetParam())];
  const int nranks = std::get<1>(GetParam());
  auto outcomes = runRanks(nranks, [&](const RankContext& ctx) { return sweepCollective(ctx, c); });
  for (int r = 0; r < nranks; ++r) {
    EXPECT_EQ(outcomes[r].exitCode, 0) << c.name << " on " << nranks << " ranks: rank " << r << " failed";
    EXPECT_FALSE(outcomes[r].timedOut) << "rank " << r << " hung";
  }
}

std::string sweepName(const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
  return std::string(collectiveCases()[std::get<0>(info.param)].name) + "_" + std::to_string(std::get<1>(info.param)) +
         "ranks";
}

INSTANTIATE_TEST_SUITE_P(AllCollectives, CollectiveSweep,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(collectiveCases().size())),
                                            ::testing::Values(1, 2, 3, 4, 8)),
                         sweepName);

// The same sweep with the ranks split across emulated nodes: peers on other
// "nodes" are reached over UCX's network transports only, so every
// collective must give exactly the flat run's results whatever the layout.
// On uniform layouts the cost model picks two-phase or leader-based
// algorithms by size; the forced cases meet every count on layouts of every
// shape, including one two-phase cannot serve (nodes of different sizes:
// the fallback) and which the leader-based algorithms serve as they are.
struct NodeLayoutCase {
  const char* name;
  std::vector<std::string> nodeOfRank;
};

const NodeLayoutCase kTwoByFour{"2x4", {"a", "a", "a", "a", "b", "b", "b", "b"}};
const NodeLayoutCase kFourByTwo{"4x2", {"a", "a", "b", "b", "c", "c", "d", "d"}};
const NodeLayoutCase kThreeByThree{"3x3", {"a", "a", "a", "b", "b", "b", "c", "c", "c"}};
const NodeLayoutCase kInterleaved{"2x3_interleaved", {"a", "b", "a", "b", "a", "b"}};
const NodeLayoutCase kPermuted{"3x2_permuted", {"c", "a", "b", "b", "a", "c"}};
// Non-uniform (3+2) and not contiguous: node b holds ranks 1, 3, 4.
const NodeLayoutCase kNonUniform{"3plus2_permuted", {"a", "b", "a", "b", "b"}};

struct EmulatedCase {
  CollectiveCase collective;
  const NodeLayoutCase* layout;
};

std::vector<EmulatedCase> emulatedCases() {
  std::vector<EmulatedCase> out;
  for (const CollectiveCase& c : collectiveCases()) {
    if (c.algorithm != nullptr) continue;  // the collectives themselves, size-based choice
    for (const NodeLayoutCase* layout : {&kTwoByFour, &kFourByTwo, &kNonUniform}) out.push_back({c, layout});
  }
  static const NodeLayoutCase* const kEveryShape[] = {&kThreeByThree, &kInterleaved, &kPermuted, &kNonUniform};
  static const NodeLayoutCase* const kIrregular[] = {&kInterleaved, &kNonUniform};
  static const struct {
    const char* base;
    const char* name;
    const char* algorithm;
    bool everyShape;  // else the interleaved and non-uniform layouts only
  } kForced[] = {
      {"allreduce", "allreduce_twophase", "allreduce:twophase", true},
      {"reducescatter", "reducescatter_twophase", "reducescatter:twophase", true},
      {"allgather", "allgather_twophase", "allgather:twophase", true},
      {"allreduce", "allreduce_leaders", "allreduce:leaders", false},
      {"broadcast", "broadcast_leaders", "broadcast:leaders", false},
      {"reduce", "reduce_leaders", "reduce:leaders", false},
  };
  for (const auto& forced : kForced) {
    for (const CollectiveCase& c : collectiveCases()) {
      if (c.algorithm != nullptr || std::string(c.name) != forced.base) continue;
      CollectiveCase copy = c;
      copy.name = forced.name;
      copy.algorithm = forced.algorithm;
      if (forced.everyShape) {
        for (const NodeLayoutCase* layout : kEveryShape) out.push_back({copy, layout});
      } else {
        for (const NodeLayoutCase* layout : kIrregular) out.push_back({copy, layout});
      }
    }
  }
  return out;
}

class EmulatedNodesSweep : public ::testing::TestWithParam<int> {};

TEST_P(EmulatedNodesSweep, MatchesReference) {
  const EmulatedCase e = emulatedCases()[GetParam()];
  const int nranks = static_cast<int>(e.layout->nodeOfRank.size());
  const bool forcedTwoPhase = e.collective.algorithm != nullptr && std::string(e.collective.algorithm).find("twophase") != std::string::npos;
  auto outcomes = runRanks(nranks, [&](const RankContext& ctx) {
    if (forcedTwoPhase) {
      // Many small slices, so the pipeline (1 to 3 slices in flight) and
      // the shard floor are exercised too, not just one slice.
      setenv("FAIRWAY_SLICE_BYTES", "262144", 1);
      setenv("FAIRWAY_MIN_SHARD_BYTES", "4096", 1);
      setenv("FAIRWAY_SLICES_IN_FLIGHT", std::to_string(1 + GetParam() % 3).c_str(), 1);
    }
    return sweepCollective(ctx, e.collective, e.layout->nodeOfRank);
  });
  for (int r = 0; r < nranks; ++r) {
    EXPECT_EQ(outcomes[r].exitCode, 0) << e.collective.name << " on layout " << e.layout->name << ": rank " << r
                                       << " failed";
    EXPECT_FALSE(outcomes[r].timedOut) << "rank " << r << " hung";
  }
}

std::string emulatedName(const ::testing::TestParamInfo<int>& info) {
  const EmulatedCase e = emulatedCases()[info.param];
  return std::string(e.collective.name) + "_" + e.layout->name;
}

INSTANTIATE_TEST_SUITE_P(AllCollectives, EmulatedNodesSweep,
                         ::testing::Range(0, static_cast<int>(emulatedCases().size())), emulatedName);

}  // namespace
}  // namespace fairway::testing
