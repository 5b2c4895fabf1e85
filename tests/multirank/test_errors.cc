// Bad arguments, mismatched calls, and failing peers: every case must end
// in its own result code and a message naming the cause, within the
// timeout, without touching the caller's buffers.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/multirank/rank_harness.h"

namespace fairway::testing {
namespace {

using Clock = std::chrono::steady_clock;

bool messageHas(const char* needle) { return std::strstr(fwGetLastErrorMessage(), needle) != nullptr; }

// A one-rank communicator in this process, for argument checks.
class SingleRank : public ::testing::Test {
 protected:
  void SetUp() override {
    fwUniqueId id;
    ASSERT_EQ(fwGetUniqueId(&id), fwSuccess) << fwGetLastErrorMessage();
    ASSERT_EQ(fwCommInitRank(&comm_, 1, id, 0), fwSuccess) << fwGetLastErrorMessage();
  }
  void TearDown() override {
    if (comm_ != nullptr) {
      EXPECT_EQ(fwCommDestroy(comm_), fwSuccess) << fwGetLastErrorMessage();
    }
  }
  fwComm_t comm_ = nullptr;
  float send_[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  float recv_[8] = {9, 9, 9, 9, 9, 9, 9, 9};
};

TEST_F(SingleRank, NullBufferWithCountIsInvalidPointer) {
  EXPECT_EQ(fwAllReduce(nullptr, recv_, 4, fwFloat32, fwSum, comm_, nullptr), fwInvalidPointer);
  EXPECT_TRUE(messageHas("sendbuff is NULL")) << fwGetLastErrorMessage();
  EXPECT_EQ(fwAllReduce(send_, nullptr, 4, fwFloat32, fwSum, comm_, nullptr), fwInvalidPointer);
  EXPECT_TRUE(messageHas("recvbuff is NULL")) << fwGetLastErrorMessage();
  EXPECT_EQ(fwAllReduce(nullptr, nullptr, 0, fwFloat32, fwSum, comm_, nullptr), fwSuccess);
  EXPECT_EQ(recv_[0], 9);
}

TEST_F(SingleRank, CountOverflowIsInvalidCount) {
  EXPECT_EQ(fwAllReduce(send_, recv_, SIZE_MAX / 2, fwFloat32, fwSum, comm_, nullptr), fwInvalidCount);
  EXPECT_TRUE(messageHas("count=")) << fwGetLastErrorMessage();
  EXPECT_EQ(fwAllGather(send_, recv_, SIZE_MAX, fwInt8, comm_, nullptr), fwInvalidCount);
  EXPECT_EQ(recv_[0], 9);
}

TEST_F(SingleRank, BadDatatypeAndOp) {
  EXPECT_EQ(fwAllReduce(send_, recv_, 4, static_cast<fwDataType_t>(42), fwSum, comm_, nullptr), fwInvalidDatatype);
  EXPECT_TRUE(messageHas("datatype 42")) << fwGetLastErrorMessage();
  EXPECT_EQ(fwAllReduce(send_, recv_, 4, fwFloat32, static_cast<fwRedOp_t>(99), comm_, nullptr), fwInvalidOp);
  EXPECT_TRUE(messageHas("op 99")) << fwGetLastErrorMessage();
  EXPECT_EQ(fwAllReduce(send_, recv_, 4, fwFloat32, fwBand, comm_, nullptr), fwOpNotSupportedForType);
  EXPECT_TRUE(messageHas("band")) << fwGetLastErrorMessage();
  EXPECT_TRUE(messageHas("float")) << fwGetLastErrorMessage();
  EXPECT_EQ(fwReduceScatter(send_, recv_, 4, fwBfloat16, fwBxor, comm_, nullptr), fwOpNotSupportedForType);
  EXPECT_EQ(recv_[0], 9);
}

TEST_F(SingleRank, RootAndPeerOutOfRangeAreInvalidRank) {
  EXPECT_EQ(fwBroadcast(send_, recv_, 4, fwFloat32, 5, comm_, nullptr), fwInvalidRank);
  EXPECT_TRUE(messageHas("root 5")) << fwGetLastErrorMessage();
  EXPECT_EQ(fwReduce(send_, recv_, 4, fwFloat32, fwSum, -1, comm_, nullptr), fwInvalidRank);
  EXPECT_EQ(fwSend(send_, 4, fwFloat32, 1, comm_, nullptr), fwInvalidRank);
  EXPECT_TRUE(messageHas("peer 1")) << fwGetLastErrorMessage();
  EXPECT_EQ(fwRecv(recv_, 4, fwFloat32, -3, comm_, nullptr), fwInvalidRank);
  EXPECT_EQ(recv_[0], 9);
}

TEST_F(SingleRank, PartialOverlapIsRejected) {
  EXPECT_EQ(fwAllReduce(send_, send_ + 1, 4, fwFloat32, fwSum, comm_, nullptr), fwInvalidArgument);
  EXPECT_TRUE(messageHas("overlap")) << fwGetLastErrorMessage();
  EXPECT_EQ(fwAllReduce(send_, send_, 4, fwFloat32, fwSum, comm_, nullptr), fwSuccess);  // in place
}

TEST_F(SingleRank, HostBuffersTakeNoStream) {
  int fakeStream = 0;
  EXPECT_EQ(fwAllReduce(send_, recv_, 4, fwFloat32, fwSum, comm_, &fakeStream), fwInvalidUsage);
  EXPECT_TRUE(messageHas("stream")) << fwGetLastErrorMessage();
}

TEST_F(SingleRank, AllToAllvCountsMustAgreeForSelf) {
  size_t sendcounts[1] = {3}, recvcounts[1] = {2}, displs[1] = {0};
  EXPECT_EQ(fwAllToAllv(send_, sendcounts, displs, recv_, recvcounts, displs, fwFloat32, comm_, nullptr),
            fwInvalidCount);
  EXPECT_EQ(fwAllToAllv(send_, nullptr, displs, recv_, recvcounts, displs, fwFloat32, comm_, nullptr),
            fwInvalidPointer);
}

TEST_F(SingleRank, UseAfterDestroyIsInvalidComm) {
  ASSERT_EQ(fwCommDestroy(comm_), fwSuccess);
  fwComm_t stale = comm_;
  comm_ = nullptr;
  EXPECT_EQ(fwAllReduce(send_, recv_, 4, fwFloat32, fwSum, stale, nullptr), fwInvalidComm);
  EXPECT_TRUE(messageHas("not a live communicator")) << fwGetLastErrorMessage();
  EXPECT_EQ(fwCommDestroy(stale), fwInvalidComm);
  EXPECT_EQ(fwAllReduce(send_, recv_, 4, fwFloat32, fwSum, nullptr, nullptr), fwInvalidComm);
  EXPECT_EQ(recv_[0], 9);
}

// Requests go through a registry like communicators: a handle that was
// released, never was a request, or is a communicator's is refused with a
// message, never followed.
TEST_F(SingleRank, ReleasedForeignAndGarbageRequestsAreRefused) {
  fwRequest_t waited = nullptr;
  ASSERT_EQ(fwIallReduce(send_, recv_, 8, fwFloat32, fwSum, comm_, &waited), fwSuccess) << fwGetLastErrorMessage();
  EXPECT_EQ(fwWait(waited), fwSuccess) << fwGetLastErrorMessage();
  EXPECT_EQ(recv_[7], 8);
  EXPECT_EQ(fwWait(waited), fwInvalidArgument);
  EXPECT_TRUE(messageHas("not a live request")) << fwGetLastErrorMessage();
  int done = 7;
  EXPECT_EQ(fwTest(waited, &done), fwInvalidArgument);
  EXPECT_EQ(done, 0);

  // Released by the fwTest that reported completion.
  fwRequest_t tested = nullptr;
  int32_t token = 41, got = 0;
  ASSERT_EQ(fwIrecv(&got, 1, fwInt32, 0, comm_, &tested), fwSuccess) << fwGetLastErrorMessage();
  ASSERT_EQ(fwSend(&token, 1, fwInt32, 0, comm_, nullptr), fwSuccess) << fwGetLastErrorMessage();
  done = 0;
  auto giveUp = Clock::now() + std::chrono::seconds(10);
  while (!done && Clock::now() < giveUp) ASSERT_EQ(fwTest(tested, &done), fwSuccess) << fwGetLastErrorMessage();
  ASSERT_EQ(done, 1);
  EXPECT_EQ(got, 41);
  EXPECT_EQ(fwTest(tested, &done), fwInvalidArgument);
  EXPECT_EQ(fwWait(tested), fwInvalidArgument);

  // Never requests: an address on the stack, a made-up number, a communicator.
  int notARequest = 0;
  EXPECT_EQ(fwWait(reinterpret_cast<fwRequest_t>(&notARequest)), fwInvalidArgument);
  EXPECT_EQ(fwTest(reinterpret_cast<fwRequest_t>(uintptr_t{0xdeadbeef}), &done), fwInvalidArgument);
  EXPECT_EQ(fwWait(reinterpret_cast<fwRequest_t>(comm_)), fwInvalidArgument);
  EXPECT_EQ(fwWait(nullptr), fwInvalidPointer);
  EXPECT_EQ(fwTest(nullptr, &done), fwInvalidPointer);
  // And a request is no communicator.
  fwRequest_t live = nullptr;
  ASSERT_EQ(fwIbarrier(comm_, &live), fwSuccess);
  int count = 0;
  EXPECT_EQ(fwCommCount(reinterpret_cast<fwComm_t>(live), &count), fwInvalidComm);
  EXPECT_EQ(fwWait(live), fwSuccess);
}

// One prefix per failed call: the collective's name appears once.
TEST_F(SingleRank, FailedCollectiveNamesItselfOnce) {
  EXPECT_EQ(fwAllReduce(send_, recv_, 4, fwFloat32, static_cast<fwRedOp_t>(-3), comm_, nullptr), fwInvalidOp);
  EXPECT_EQ(std::string(fwGetLastErrorMessage()).rfind("allreduce: op -3", 0), 0u) << fwGetLastErrorMessage();
}

TEST(InitArguments, AreValidated) {
  fwUniqueId id;
  ASSERT_EQ(fwGetUniqueId(&id), fwSuccess);
  fwComm_t comm = nullptr;
  EXPECT_EQ(fwCommInitRank(&comm, 2, id, 2), fwInvalidRank);
  EXPECT_EQ(fwCommInitRank(&comm, 0, id, 0), fwInvalidArgument);
  EXPECT_EQ(fwCommInitRank(nullptr, 1, id, 0), fwInvalidPointer);
  fwUniqueId garbage;
  std::memset(&garbage, 0x5a, sizeof(garbage));
  EXPECT_EQ(fwCommInitRank(&comm, 1, garbage, 0), fwInvalidArgument);
  EXPECT_TRUE(messageHas("unique id")) << fwGetLastErrorMessage();
  EXPECT_EQ(comm, nullptr);
}

TEST(InitArguments, InvalidEnvironmentNamesTheVariable) {
  fwUniqueId id;
  ASSERT_EQ(fwGetUniqueId(&id), fwSuccess);
  fwComm_t comm = nullptr;
  setenv("FAIRWAY_ALGO", "allreduce:bogus", 1);
  EXPECT_EQ(fwCommInitRank(&comm, 1, id, 0), fwInvalidArgument);
  EXPECT_TRUE(messageHas("FAIRWAY_ALGO")) << fwGetLastErrorMessage();
  unsetenv("FAIRWAY_ALGO");
  setenv("FAIRWAY_TIMEOUT_MS", "soon", 1);
  EXPECT_EQ(fwCommInitRank(&comm, 1, id, 0), fwInvalidArgument);
  EXPECT_TRUE(messageHas("FAIRWAY_TIMEOUT_MS=soon")) << fwGetLastErrorMessage();
  unsetenv("FAIRWAY_TIMEOUT_MS");
}

TEST(ErrorStrings, EveryCodeHasOne) {
  for (int code = 0; code < fwNumResults; ++code) {
    EXPECT_STRNE(fwGetErrorString(static_cast<fwResult_t>(code)), "unknown result code") << code;
  }
  int version = 0;
  EXPECT_EQ(fwGetVersion(&version), fwSuccess);
  EXPECT_EQ(version, FAIRWAY_VERSION_CODE);
}

// ---- multi-rank failures; each runs with a short FAIRWAY_TIMEOUT_MS ----

constexpr int kTimeoutMs = 3000;

class Faults : public ::testing::Test {
 protected:
  void SetUp() override { setenv("FAIRWAY_TIMEOUT_MS", std::to_string(kTimeoutMs).c_str(), 1); }
  void TearDown() override { unsetenv("FAIRWAY_TIMEOUT_MS"); }
};

int initOrReport(const RankContext& ctx, fwComm_t* comm) {
  if (fwCommInitRank(comm, ctx.nranks, ctx.id, ctx.rank) == fwSuccess) return 0;
  reportFailure(ctx, std::string("init: ") + fwGetLastErrorMessage());
  return 1;
}

// Expects result to be one of codes and the message to contain needle,
// within budgetMs of start.
int expectFailure(const RankContext& ctx, fwResult_t result, std::vector<fwResult_t> codes, const char* needle,
                  Clock::time_point start, int budgetMs) {
  int failures = 0;
  bool codeOk = false;
  for (fwResult_t c : codes) codeOk = codeOk || c == result;
  if (!codeOk) {
    reportFailure(ctx, std::string("unexpected result ") + fwGetErrorString(result) + ": " + fwGetLastErrorMessage());
    ++failures;
  }
  if (needle && !messageHas(needle)) {
    reportFailure(ctx, std::string("message lacks '") + needle + "': " + fwGetLastErrorMessage());
    ++failures;
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  if (ms > budgetMs) {
    reportFailure(ctx, "took " + std::to_string(ms) + " ms, budget " + std::to_string(budgetMs));
    ++failures;
  }
  return failures;
}

TEST_F(Faults, MismatchedCollectivesAreDiagnosed) {
  auto outcomes = runRanks(2, [](const RankContext& ctx) {
    fwComm_t comm;
    if (initOrReport(ctx, &comm)) return 1;
    std::vector<float> a(1000, 1.0f), b(1000);
    auto start = Clock::now();
    fwResult_t r = ctx.rank == 0 ? fwAllReduce(a.data(), b.data(), 1000, fwFloat32, fwSum, comm, nullptr)
                                 : fwBroadcast(a.data(), b.data(), 1000, fwFloat32, 0, comm, nullptr);
    int failures = expectFailure(ctx, r, {fwCollectiveMismatch, fwRemoteError}, "different collectives", start,
                                 kTimeoutMs);
    fwCommAbort(comm);
    return failures;
  });
  for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0);
}

TEST_F(Faults, MismatchedCountsAreDiagnosed) {
  auto outcomes = runRanks(2, [](const RankContext& ctx) {
    fwComm_t comm;
    if (initOrReport(ctx, &comm)) return 1;
    std::vector<double> a(4096, 1.0), b(4096);
    size_t count = ctx.rank == 0 ? 1000 : 4000;
    auto start = Clock::now();
    fwResult_t r = fwAllReduce(a.data(), b.data(), count, fwFloat64, fwSum, comm, nullptr);
    int failures = expectFailure(ctx, r, {fwCollectiveMismatch, fwRemoteError}, nullptr, start, kTimeoutMs);
    fwCommAbort(comm);
    return failures;
  });
  for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0);
}

// Ranks that compress differently (or one not at all) run different
// collectives: diagnosed like any mismatch, never decoded as garbage.
TEST_F(Faults, MismatchedCompressionIsDiagnosed) {
  auto outcomes = runRanks(2, [](const RankContext& ctx) {
    fwComm_t comm;
    if (initOrReport(ctx, &comm)) return 1;
    std::vector<float> a(1 << 16, 1.0f), b(1 << 16);
    fwCompression_t c = FW_COMPRESSION_INITIALIZER;
    c.kind = ctx.rank == 0 ? fwCompressInt8 : fwCompressFp16;
    auto start = Clock::now();
    fwResult_t r = fwAllReduceCompressed(a.data(), b.data(), a.size(), fwFloat32, fwSum, &c, comm, nullptr);
    int failures = expectFailure(ctx, r, {fwCollectiveMismatch, fwRemoteError}, nullptr, start, kTimeoutMs);
    fwCommAbort(comm);
    return failures;
  });
  for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0);
}

TEST_F(Faults, KilledRankIsNamedByEverySurvivor) {
  auto outcomes = runRanks(4, [](const RankContext& ctx) {
    fwComm_t comm;
    if (initOrReport(ctx, &comm)) return 1;
    std::vector<float> a(1 << 18, 1.0f), b(1 << 18);
    // Bounded: rank 2 dies at the fourth call, so a survivor fails long before.
    for (int i = 0; i < 1000; ++i) {
      if (ctx.rank == 2 && i == 3) raise(SIGKILL);
      auto start = Clock::now();
      fwResult_t r = fwAllReduce(a.data(), b.data(), a.size(), fwFloat32, fwSum, comm, nullptr);
      if (r == fwSuccess) continue;
      int failures = expectFailure(ctx, r, {fwRemoteError, fwTimeout}, "rank 2", start, kTimeoutMs + 2000);
      fwResult_t async = fwSuccess;
      fwCommGetAsyncError(comm, &async);
      if (async == fwSuccess) {
        reportFailure(ctx, "communicator still reports healthy");
        ++failures;
      }
      // Later calls fail at once with the same cause.
      if (fwAllReduce(a.data(), b.data(), 16, fwFloat32, fwSum, comm, nullptr) == fwSuccess) ++failures;
      fwCommAbort(comm);
      return failures;
    }
    reportFailure(ctx, "1000 allreduces succeeded although rank 2 was killed");
    return 1;
  });
  for (int r = 0; r < 4; ++r) {
    if (r == 2) {
      EXPECT_EQ(outcomes[r].exitCode, 128 + SIGKILL);
    } else {
      EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
    }
  }
}

TEST_F(Faults, RankThatNeverArrivesIsNamed) {
  auto outcomes = runRanks(3, [](const RankContext& ctx) {
    if (ctx.rank == 2) return 0;  // never joins
    fwComm_t comm = nullptr;
    auto start = Clock::now();
    fwResult_t r = fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank);
    return expectFailure(ctx, r, {fwTimeout, fwRemoteError}, "2", start, 3 * kTimeoutMs + 2000);
  });
  for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0);
}

// A rank that calls a collective after its peer gave up on it learns of
// the failure while it is idle (its progress thread reads the peer's
// notice), so its late call fails with the peer's cause at once: on the
// node's segment instead of completing alone on the input its peer left
// there, over UCX alone instead of waiting out its own timeout. The peer
// counts it as failed and still tells it.
class LateRank : public Faults, public ::testing::WithParamInterface<bool> {};

TEST_P(LateRank, FailsWithItsPeerInsteadOfCompletingAlone) {
  if (!GetParam()) setenv("FAIRWAY_INTRA_TRANSPORT", "ucx", 1);
  auto outcomes = runRanks(2, [](const RankContext& ctx) {
    fwComm_t comm;
    if (initOrReport(ctx, &comm)) return 1;
    std::vector<int32_t> a(64, 1), b(64);
    if (ctx.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(kTimeoutMs + 1500));
    auto start = Clock::now();
    fwResult_t r = fwAllReduce(a.data(), b.data(), 64, fwInt32, fwSum, comm, nullptr);
    int failures = ctx.rank == 1 ? expectFailure(ctx, r, {fwRemoteError}, "rank 0 reports: rank 1", start, 1000)
                                 : expectFailure(ctx, r, {fwTimeout}, "rank 1", start, kTimeoutMs + 1000);
    fwCommAbort(comm);
    return failures;
  });
  unsetenv("FAIRWAY_INTRA_TRANSPORT");
  for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0);
}
INSTANTIATE_TEST_SUITE_P(Paths, LateRank, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "segment" : "ucx"; });

// A rank that hangs: alive, its communicator open, calling nothing. The
// harness kills it once the others have ended (kRankOneHangs); the sleep's
// bound is far past every budget the others check.
int hangWithoutCalling() {
  std::this_thread::sleep_for(std::chrono::milliseconds(10 * kTimeoutMs));
  return 1;
}
const RankOptions kRankOneHangs{0, true, {1}};

TEST_F(Faults, StalledPeerTimesOutWithItsName) {
  auto outcomes = runRanks(2, [](const RankContext& ctx) {
    fwComm_t comm;
    if (initOrReport(ctx, &comm)) return 1;
    std::vector<int32_t> a(64, 1), b(64);
    if (ctx.rank == 1) return hangWithoutCalling();
    auto start = Clock::now();
    fwResult_t r = fwAllReduce(a.data(), b.data(), 64, fwInt32, fwSum, comm, nullptr);
    int failures = expectFailure(ctx, r, {fwTimeout}, "rank 1", start, kTimeoutMs + 1000);
    fwCommAbort(comm);
    return failures;
  }, kRankOneHangs);
  EXPECT_EQ(outcomes[0].exitCode, 0);
  EXPECT_EQ(outcomes[1].exitCode, 128 + SIGKILL) << "rank 1 was to hang until the harness killed it";
}

// rank 0 receives from any source; rank 1 never sends, and with three
// ranks rank 2 is killed first.
int receiveFromNobody(const RankContext& ctx, fwResult_t want, const char* needle) {
  fwComm_t comm;
  if (initOrReport(ctx, &comm)) return 1;
  if (ctx.rank == 2) raise(SIGKILL);
  if (ctx.rank == 1) return hangWithoutCalling();
  int32_t value = 0;
  int source = -1;
  auto start = Clock::now();
  fwResult_t r = fwRecvTagged(&value, 1, fwInt32, FAIRWAY_ANY_SOURCE, 4, &source, comm, nullptr);
  int failures = expectFailure(ctx, r, {want}, needle, start, kTimeoutMs + 1500);
  if (source != -1) {
    reportFailure(ctx, "a failed receive reported a source");
    ++failures;
  }
  fwCommAbort(comm);
  return failures;
}

TEST_F(Faults, ReceiveFromAnySourceTimesOut) {
  auto outcomes = runRanks(2, [](const RankContext& ctx) {
    return receiveFromNobody(ctx, fwTimeout, "no rank sent a message with tag 4");
  }, kRankOneHangs);
  EXPECT_EQ(outcomes[0].exitCode, 0);
  EXPECT_EQ(outcomes[1].exitCode, 128 + SIGKILL);
}

TEST_F(Faults, ReceiveFromAnySourceEndsWhenAPeerDies) {
  auto outcomes = runRanks(3, [](const RankContext& ctx) { return receiveFromNobody(ctx, fwRemoteError, "rank 2"); },
                           kRankOneHangs);
  EXPECT_EQ(outcomes[0].exitCode, 0);
  EXPECT_EQ(outcomes[1].exitCode, 128 + SIGKILL);
  EXPECT_EQ(outcomes[2].exitCode, 128 + SIGKILL);
}

TEST_F(Faults, AbortReachesPeersWaitingInACollective) {
  auto outcomes = runRanks(3, [](const RankContext& ctx) {
    fwComm_t comm;
    if (initOrReport(ctx, &comm)) return 1;
    std::vector<float> a(1024, 1.0f), b(1024);
    if (ctx.rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      return fwCommAbort(comm) == fwSuccess ? 0 : 1;
    }
    auto start = Clock::now();
    fwResult_t r = fwAllReduce(a.data(), b.data(), a.size(), fwFloat32, fwSum, comm, nullptr);
    int failures = expectFailure(ctx, r, {fwRemoteError}, "rank 0", start, kTimeoutMs);
    fwCommAbort(comm);
    return failures;
  });
  for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0);
}

TEST_F(Faults, WrongSecretIsRejectedWhileTheJobForms) {
  auto outcomes = runRanks(3, [](const RankContext& ctx) {
    fwUniqueId id = ctx.id;
    if (ctx.rank == 2) {
      // A process from another job: same root, different secret, claims rank 1.
      id.internal[FAIRWAY_UNIQUE_ID_BYTES - 1] ^= 0x5a;
      fwComm_t comm = nullptr;
      auto start = Clock::now();
      fwResult_t r = fwCommInitRank(&comm, 2, id, 1);
      return expectFailure(ctx, r, {fwAuthError, fwRemoteError}, "secret", start, kTimeoutMs + 1000);
    }
    if (ctx.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the stray go first
    fwComm_t comm;
    if (fwCommInitRank(&comm, 2, id, ctx.rank) != fwSuccess) {
      reportFailure(ctx, std::string("legitimate rank could not join: ") + fwGetLastErrorMessage());
      return 1;
    }
    int32_t mine = ctx.rank + 1, sum = 0;
    int failures = fwAllReduce(&mine, &sum, 1, fwInt32, fwSum, comm, nullptr) == fwSuccess && sum == 3 ? 0 : 1;
    return failures + (fwCommDestroy(comm) == fwSuccess ? 0 : 1);
  });
  for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0);
}

}  // namespace
}  // namespace fairway::testing
