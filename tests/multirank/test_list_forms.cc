// The list forms, fwAllGatherList and fwReduceScatterList (blocking and
// non-blocking): every rank's block in a buffer of its own, with guard
// bytes, on every path that serves them (the node's segment in rounds and
// by single-copy reads, UCX's ring inside a node, two emulated nodes), in
// and out of place, mixed on one call with ranks making the plain call;
// and their argument checks, which leave the caller's buffers untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/multirank/rank_harness.h"

namespace fairway::testing {
namespace {

// How a run reaches the list forms' providers.
struct ListPath {
  const char* name;
  int nranks;
  // Variables set in every rank before its communicator is made.
  std::vector<std::pair<const char*, const char*>> env;
  bool twoNodes = false;  // ranks 0 .. n/2-1 on one emulated node, the rest on another
};

const std::vector<ListPath>& listPaths() {
  static const std::vector<ListPath> paths = {
      {"OneRank", 1, {}},
      {"SegmentRounds3", 3, {{"FAIRWAY_SHM_SINGLE_COPY_BYTES", "0"}}},
      {"SegmentRounds4", 4, {{"FAIRWAY_SHM_SINGLE_COPY_BYTES", "0"}}},
      {"SegmentSingleCopy3", 3, {{"FAIRWAY_SHM_SINGLE_COPY_BYTES", "1"}}},
      {"UcxRing3", 3, {{"FAIRWAY_INTRA_TRANSPORT", "ucx"}}},
      {"TwoNodes2x2", 4, {}, true},
      {"TwoNodesTwoPhase2x2", 4, {{"FAIRWAY_ALGO", "allgather:twophase;reducescatter:twophase"}}, true},
  };
  return paths;
}

int32_t valueOf(int rank, size_t block, size_t i) { return static_cast<int32_t>(rank * 7919 + block * 131 + i % 1009); }

// Blocks of count int32 elements, each a GuardedBuffer of its own.
struct Blocks {
  Blocks(int n, size_t count) {
    for (int q = 0; q < n; ++q) buffers.push_back(std::make_unique<GuardedBuffer>(count * sizeof(int32_t)));
  }
  int32_t* at(int q) { return static_cast<int32_t*>(buffers[q]->data()); }
  std::vector<void*> addresses() {
    std::vector<void*> out;
    for (auto& b : buffers) out.push_back(b->data());
    return out;
  }
  bool guardsIntact() const {
    for (const auto& b : buffers) if (!b->guardsIntact()) return false;
    return true;
  }
  std::vector<std::unique_ptr<GuardedBuffer>> buffers;
};

// One allgather: the list form (blocking or not), or the plain call on
// ranks in `plainRanks`; in place puts this rank's block in its output.
int allgatherOnce(const RankContext& ctx, fwComm_t comm, size_t count, bool inPlace, bool nonBlocking,
                  bool plainOnRankZero) {
  int failures = 0;
  const int n = ctx.nranks;
  const std::string what = std::string("allgather list of ") + std::to_string(count) + (inPlace ? " in place" : "") +
                           (nonBlocking ? " non-blocking" : "");
  GuardedBuffer mine(count * sizeof(int32_t));
  auto* own = static_cast<int32_t*>(mine.data());
  for (size_t i = 0; i < count; ++i) own[i] = valueOf(ctx.rank, 0, i);
  if (plainOnRankZero && ctx.rank == 0) {
    GuardedBuffer all(count * n * sizeof(int32_t));
    auto* out = static_cast<int32_t*>(all.data());
    RANK_CHECK(ctx, fwAllGather(own, out, count, fwInt32, comm, nullptr) == fwSuccess, what + " (plain call)");
    for (int q = 0; q < n; ++q) {
      for (size_t i = 0; i < count; ++i) RANK_CHECK(ctx, out[q * count + i] == valueOf(q, 0, i), what + " value");
    }
    return failures;
  }
  Blocks blocks(n, count);
  for (int q = 0; q < n; ++q) std::fill(blocks.at(q), blocks.at(q) + count, -1);
  if (inPlace) std::memcpy(blocks.at(ctx.rank), own, count * sizeof(int32_t));
  const void* send = inPlace ? static_cast<const void*>(blocks.at(ctx.rank)) : own;
  std::vector<void*> list = blocks.addresses();
  if (nonBlocking) {
    fwRequest_t request = nullptr;
    RANK_CHECK(ctx, fwIallGatherList(send, list.data(), count, fwInt32, comm, &request) == fwSuccess, what);
    list.assign(list.size(), nullptr);  // the call copied the array
    if (request != nullptr) RANK_CHECK(ctx, fwWait(request) == fwSuccess, what + " wait");
  } else {
    RANK_CHECK(ctx, fwAllGatherList(send, list.data(), count, fwInt32, comm, nullptr) == fwSuccess, what);
  }
  size_t wrong = 0;
  for (int q = 0; q < n; ++q) {
    for (size_t i = 0; i < count; ++i) wrong += blocks.at(q)[i] != valueOf(q, 0, i);
  }
  RANK_CHECK(ctx, wrong == 0, what + ": " + std::to_string(wrong) + " wrong values");
  RANK_CHECK(ctx, blocks.guardsIntact() && mine.guardsIntact(), what + ": a write past a block");
  for (size_t i = 0; i < count && !inPlace; ++i) RANK_CHECK(ctx, own[i] == valueOf(ctx.rank, 0, i), what + " input");
  return failures;
}

// One reduce-scatter (sum of int32, exact): the list form, or the plain
// call on rank 0 when plainOnRankZero; in place reduces into this rank's
// own input block.
int reduceScatterOnce(const RankContext& ctx, fwComm_t comm, size_t count, bool inPlace, bool nonBlocking,
                      bool plainOnRankZero) {
  int failures = 0;
  const int n = ctx.nranks;
  const std::string what = std::string("reduce-scatter list of ") + std::to_string(count) +
                           (inPlace ? " in place" : "") + (nonBlocking ? " non-blocking" : "");
  auto expected = [&](size_t i) {
    int64_t sum = 0;
    for (int r = 0; r < n; ++r) sum += valueOf(r, ctx.rank, i);
    return static_cast<int32_t>(sum);
  };
  if (plainOnRankZero && ctx.rank == 0) {
    GuardedBuffer all(count * n * sizeof(int32_t)), out(count * sizeof(int32_t));
    auto* in = static_cast<int32_t*>(all.data());
    for (int q = 0; q < n; ++q) for (size_t i = 0; i < count; ++i) in[q * count + i] = valueOf(ctx.rank, q, i);
    auto* result = static_cast<int32_t*>(out.data());
    RANK_CHECK(ctx, fwReduceScatter(in, result, count, fwInt32, fwSum, comm, nullptr) == fwSuccess,
               what + " (plain call)");
    for (size_t i = 0; i < count; ++i) RANK_CHECK(ctx, result[i] == expected(i), what + " value");
    return failures;
  }
  Blocks blocks(n, count);
  for (int q = 0; q < n; ++q) for (size_t i = 0; i < count; ++i) blocks.at(q)[i] = valueOf(ctx.rank, q, i);
  GuardedBuffer out(count * sizeof(int32_t));
  int32_t* result = inPlace ? blocks.at(ctx.rank) : static_cast<int32_t*>(out.data());
  std::vector<const void*> list;
  for (int q = 0; q < n; ++q) list.push_back(blocks.at(q));
  if (nonBlocking) {
    fwRequest_t request = nullptr;
    RANK_CHECK(ctx, fwIreduceScatterList(list.data(), result, count, fwInt32, fwSum, comm, &request) == fwSuccess,
               what);
    list.assign(list.size(), nullptr);
    if (request != nullptr) RANK_CHECK(ctx, fwWait(request) == fwSuccess, what + " wait");
  } else {
    RANK_CHECK(ctx, fwReduceScatterList(list.data(), result, count, fwInt32, fwSum, comm, nullptr) == fwSuccess,
               what);
  }
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += result[i] != expected(i);
  RANK_CHECK(ctx, wrong == 0, what + ": " + std::to_string(wrong) + " wrong values");
  // The caller's input blocks are read only (but for the in-place one).
  for (int q = 0; q < n; ++q) {
    if (inPlace && q == ctx.rank) continue;
    for (size_t i = 0; i < count; ++i) wrong += blocks.at(q)[i] != valueOf(ctx.rank, q, i);
  }
  RANK_CHECK(ctx, wrong == 0, what + ": an input block changed");
  RANK_CHECK(ctx, blocks.guardsIntact() && out.guardsIntact(), what + ": a write past a block");
  return failures;
}

// An average of float blocks: the reducer's finalisation on the list path.
int reduceScatterAverage(const RankContext& ctx, fwComm_t comm, size_t count) {
  int failures = 0;
  const int n = ctx.nranks;
  std::vector<std::vector<float>> blocks(n, std::vector<float>(count));
  for (int q = 0; q < n; ++q) for (size_t i = 0; i < count; ++i) blocks[q][i] = static_cast<float>(ctx.rank + q + i % 5);
  std::vector<const void*> list;
  for (auto& b : blocks) list.push_back(b.data());
  std::vector<float> out(count, -1.0f);
  RANK_CHECK(ctx, fwReduceScatterList(list.data(), out.data(), count, fwFloat32, fwAvg, comm, nullptr) == fwSuccess,
             "reduce-scatter list avg");
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const float expected = static_cast<float>((n - 1) / 2.0 + ctx.rank + i % 5);
    wrong += std::fabs(out[i] - expected) > 1e-5f;
  }
  RANK_CHECK(ctx, wrong == 0, "reduce-scatter list avg: " + std::to_string(wrong) + " wrong values");
  return failures;
}

class ListForms : public ::testing::TestWithParam<int> {};

TEST_P(ListForms, MatchThePlainCalls) {
  const ListPath& path = listPaths()[GetParam()];
  auto outcomes = runRanks(path.nranks, [&](const RankContext& ctx) {
    for (const auto& [name, value] : path.env) setenv(name, value, 1);
    if (path.twoNodes) setenv("FAIRWAY_NODE_ID", ctx.rank < ctx.nranks / 2 ? "a" : "b", 1);
    // The chunk of a CPU per rank, so that 100003 elements span rounds
    // whatever the default is on this host.
    setenv("FAIRWAY_SHM_CHUNK_BYTES", "256K", 0);
    int failures = 0;
    fwComm_t comm;
    RANK_CHECK(ctx, fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) == fwSuccess, "init");
    if (failures) return failures;
    // 0, one element, a few, and past one round of the segment's chunk.
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{100003}}) {
      for (bool inPlace : {false, true}) {
        for (bool nonBlocking : {false, true}) {
          failures += allgatherOnce(ctx, comm, count, inPlace, nonBlocking, false);
          failures += reduceScatterOnce(ctx, comm, count, inPlace, nonBlocking, false);
        }
      }
      failures += allgatherOnce(ctx, comm, count, false, false, true);
      failures += reduceScatterOnce(ctx, comm, count, false, true, true);
    }
    failures += reduceScatterAverage(ctx, comm, 4099);
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    return failures;
  });
  for (size_t r = 0; r < outcomes.size(); ++r) {
    EXPECT_EQ(outcomes[r].exitCode, 0) << path.name << ": rank " << r << " failed";
    EXPECT_FALSE(outcomes[r].timedOut) << path.name << ": rank " << r << " hung";
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, ListForms, ::testing::Range(0, static_cast<int>(listPaths().size())),
                         [](const ::testing::TestParamInfo<int>& info) { return listPaths()[info.param].name; });

// Each refused call returns its code, names what was wrong and writes
// nothing; the communicator works afterwards.
TEST(ListFormArguments, AreRefusedWithTheirReason) {
  auto outcomes = runRanks(2, [](const RankContext& ctx) {
    setenv("FAIRWAY_DEVICE_RUNTIME", "host-emulated", 1);
    int failures = 0;
    fwComm_t comm;
    RANK_CHECK(ctx, fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) == fwSuccess, "init");
    if (failures) return failures;
    constexpr size_t kCount = 16;
    std::vector<int32_t> a(kCount, 5), b(kCount, 6), c(2 * kCount, 7);
    auto untouched = [&] {
      for (int32_t v : a) if (v != 5) return false;
      for (int32_t v : b) if (v != 6) return false;
      for (int32_t v : c) if (v != 7) return false;
      return true;
    };
    auto expectRefused = [&](fwResult_t got, fwResult_t code, const char* mentions, const std::string& what) {
      const std::string message = fwGetLastErrorMessage();
      RANK_CHECK(ctx, got == code, what + ": code " + std::to_string(got));
      RANK_CHECK(ctx, message.find(mentions) != std::string::npos, what + ": message '" + message + "'");
      RANK_CHECK(ctx, untouched(), what + ": a buffer was written");
    };
    void* outs[2] = {b.data(), c.data()};
    expectRefused(fwAllGatherList(a.data(), nullptr, kCount, fwInt32, comm, nullptr), fwInvalidPointer,
                  "recvbuffs is NULL", "NULL array");
    void* withNull[2] = {b.data(), nullptr};
    expectRefused(fwAllGatherList(a.data(), withNull, kCount, fwInt32, comm, nullptr), fwInvalidPointer,
                  "recvbuffs[1] is NULL", "NULL block");
    void* overlapping[2] = {c.data(), c.data() + kCount / 2};
    expectRefused(fwAllGatherList(a.data(), overlapping, kCount, fwInt32, comm, nullptr), fwInvalidArgument,
                  "recvbuffs[0] and recvbuffs[1] overlap", "overlapping blocks");
    const int other = 1 - ctx.rank;
    expectRefused(fwAllGatherList(outs[other], outs, kCount, fwInt32, comm, nullptr), fwInvalidArgument,
                  "sendbuff overlaps recvbuffs", "send in another rank's block");
    int stream = 0;
    expectRefused(fwAllGatherList(a.data(), outs, kCount, fwInt32, comm, &stream), fwInvalidUsage, "stream",
                  "a stream with host buffers");
    const void* ins[2] = {b.data(), c.data()};
    expectRefused(fwReduceScatterList(ins, const_cast<void*>(ins[other]), kCount, fwInt32, fwSum, comm, nullptr),
                  fwInvalidArgument, "recvbuff overlaps sendbuffs", "recv in another rank's block");
    expectRefused(fwReduceScatterList(ins, a.data(), kCount, fwFloat32, fwBand, comm, nullptr), fwOpNotSupportedForType,
                  "band", "a bitwise op on floats");
    fwRequest_t request = reinterpret_cast<fwRequest_t>(&stream);
    expectRefused(fwIreduceScatterList(nullptr, a.data(), kCount, fwInt32, fwSum, comm, &request), fwInvalidPointer,
                  "sendbuffs is NULL", "NULL array, non-blocking");
    RANK_CHECK(ctx, request == nullptr, "a refused non-blocking call leaves no request");
    // Device memory (the host-emulated runtime's) takes the plain calls.
    GuardedBuffer device(kCount * sizeof(int32_t), true);
    if (device.data() != nullptr) {
      void* deviceOuts[2] = {b.data(), b.data()};
      deviceOuts[ctx.rank] = device.data();
      deviceOuts[other] = c.data();
      expectRefused(fwAllGatherList(a.data(), deviceOuts, kCount, fwInt32, comm, nullptr), fwInvalidUsage,
                    "device memory: the list forms take host buffers", "a device block");
    } else {
      RANK_CHECK(ctx, false, "fwMemAlloc under the host-emulated runtime");
    }
    // Still in step: a good call on every rank.
    RANK_CHECK(ctx, fwAllGatherList(a.data(), outs, kCount, fwInt32, comm, nullptr) == fwSuccess, "a good call");
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    return failures;
  });
  for (size_t r = 0; r < outcomes.size(); ++r) EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
}

}  // namespace
}  // namespace fairway::testing
