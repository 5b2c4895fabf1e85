// Communicator management, point-to-point, non-blocking calls, barrier
// ordering, alltoallv and initialisation from a launcher's environment.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/multirank/api_test_helpers.h"

namespace fairway::testing {
namespace {

// The tests below run on one node, and again with even and odd ranks posing
// as two nodes (interleaved), so half their traffic crosses UCX's network
// transports.
class OnNodeLayouts : public ::testing::TestWithParam<bool> {};

// Completes request by fwTest alone, giving up after 30 s.
int testUntilDone(const RankContext& ctx, fwRequest_t request, const std::string& what) {
  int failures = 0;
  int done = 0;
  auto giveUp = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done && failures == 0 && std::chrono::steady_clock::now() < giveUp) {
    RANK_CHECK(ctx, fwTest(request, &done) == fwSuccess, "test " + what);
  }
  RANK_CHECK(ctx, done, what + " completed within 30 s");
  return failures;
}

INSTANTIATE_TEST_SUITE_P(Layouts, OnNodeLayouts, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "TwoInterleavedNodes" : "OneNode");
                         });

TEST_P(OnNodeLayouts, SplitGroupsByColorAndOrdersByKey) {
  const bool split = GetParam();
  expectAllSucceeded(runRanks(5, [split](const RankContext& ctx) {
    int failures = 0;
    poseAsNodes(ctx, split);
    fwComm_t world;
    RANK_CHECK(ctx, fwCommInitRank(&world, ctx.nranks, ctx.id, ctx.rank) == fwSuccess, "init");
    // Ranks 0, 2 even; 1, 3 odd; rank 4 opts out. Keys reverse the order.
    int color = ctx.rank == 4 ? FAIRWAY_SPLIT_NOCOLOR : ctx.rank % 2;
    fwComm_t half = nullptr;
    RANK_CHECK(ctx, fwCommSplit(world, color, -ctx.rank, &half) == fwSuccess, "split");
    if (ctx.rank == 4) {
      RANK_CHECK(ctx, half == nullptr, "NOCOLOR rank got a communicator");
    } else {
      int rank = -1, size = -1;
      fwCommUserRank(half, &rank);
      fwCommCount(half, &size);
      RANK_CHECK(ctx, size == 2, "split size");
      RANK_CHECK(ctx, rank == (ctx.rank < 2 ? 1 : 0), "split rank follows key");
      int64_t mine = ctx.rank, sum = -1;
      RANK_CHECK(ctx, fwAllReduce(&mine, &sum, 1, fwInt64, fwSum, half, nullptr) == fwSuccess, "allreduce in split");
      RANK_CHECK(ctx, sum == (color == 0 ? 2 : 4), "sum over the split's members");
      RANK_CHECK(ctx, fwCommDestroy(half) == fwSuccess, "destroy split");
    }
    // The parent still works after the split.
    int64_t one = 1, total = 0;
    RANK_CHECK(ctx, fwAllReduce(&one, &total, 1, fwInt64, fwSum, world, nullptr) == fwSuccess && total == 5,
               "parent after split");
    RANK_CHECK(ctx, fwCommDestroy(world) == fwSuccess, "destroy world");
    return failures;
  }));
}

TEST_P(OnNodeLayouts, PointToPointRingExchangeAndSelfMessages) {
  runWithComm(4, GetParam(), [](const RankContext& ctx, fwComm_t comm) {
    int failures = 0;
    const size_t n = (1 << 20) + 3;
    std::vector<float> out(n), in(n, -1.0f);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(ctx.rank * 1000 + i % 1000);
    int right = (ctx.rank + 1) % ctx.nranks, left = (ctx.rank + ctx.nranks - 1) % ctx.nranks;
    fwRequest_t send, recv;
    RANK_CHECK(ctx, fwIrecv(in.data(), n, fwFloat32, left, comm, &recv) == fwSuccess, "irecv");
    RANK_CHECK(ctx, fwIsend(out.data(), n, fwFloat32, right, comm, &send) == fwSuccess, "isend");
    if (failures) return failures;
    failures += testUntilDone(ctx, recv, "irecv");
    RANK_CHECK(ctx, fwWait(send) == fwSuccess, "wait send");
    bool ok = true;
    for (size_t i = 0; i < n; ++i) ok = ok && in[i] == static_cast<float>(left * 1000 + i % 1000);
    RANK_CHECK(ctx, ok, "ring payload");
    // Blocking pairs: even ranks send first, odd ranks receive first.
    int partner = ctx.rank ^ 1;
    int32_t token = ctx.rank, got = -1;
    if (ctx.rank % 2 == 0) {
      RANK_CHECK(ctx, fwSend(&token, 1, fwInt32, partner, comm, nullptr) == fwSuccess, "send");
      RANK_CHECK(ctx, fwRecv(&got, 1, fwInt32, partner, comm, nullptr) == fwSuccess, "recv");
    } else {
      RANK_CHECK(ctx, fwRecv(&got, 1, fwInt32, partner, comm, nullptr) == fwSuccess, "recv");
      RANK_CHECK(ctx, fwSend(&token, 1, fwInt32, partner, comm, nullptr) == fwSuccess, "send");
    }
    RANK_CHECK(ctx, got == partner, "pair payload");
    // Messages to oneself, and messages matched in order.
    int32_t a = 7, b = 8, x = 0, y = 0;
    fwRequest_t r1, r2;
    RANK_CHECK(ctx, fwIrecv(&x, 1, fwInt32, ctx.rank, comm, &r1) == fwSuccess, "self irecv 1");
    RANK_CHECK(ctx, fwIrecv(&y, 1, fwInt32, ctx.rank, comm, &r2) == fwSuccess, "self irecv 2");
    RANK_CHECK(ctx, fwSend(&a, 1, fwInt32, ctx.rank, comm, nullptr) == fwSuccess, "self send 1");
    RANK_CHECK(ctx, fwSend(&b, 1, fwInt32, ctx.rank, comm, nullptr) == fwSuccess, "self send 2");
    RANK_CHECK(ctx, fwWait(r1) == fwSuccess && fwWait(r2) == fwSuccess, "self waits");
    RANK_CHECK(ctx, x == 7 && y == 8, "self messages in order");
    return failures;
  });
}

TEST_P(OnNodeLayouts, TaggedMessagesAndReceivesFromAnySource) {
  runWithComm(4, GetParam(), [](const RankContext& ctx, fwComm_t comm) {
    int failures = 0;
    const int right = (ctx.rank + 1) % ctx.nranks, left = (ctx.rank + ctx.nranks - 1) % ctx.nranks;

    // Tags match independently: tag 9 is received before the larger tag 5
    // message sent ahead of it.
    const size_t big = 1 << 18;
    std::vector<float> five(big, static_cast<float>(ctx.rank)), gotFive(big, -1.0f);
    int32_t nine = 900 + ctx.rank, gotNine = -1;
    fwRequest_t sends[2];
    RANK_CHECK(ctx, fwIsendTagged(five.data(), big, fwFloat32, right, 5, comm, &sends[0]) == fwSuccess, "isend 5");
    RANK_CHECK(ctx, fwIsendTagged(&nine, 1, fwInt32, right, 9, comm, &sends[1]) == fwSuccess, "isend 9");
    int source = -1;
    RANK_CHECK(ctx, fwRecvTagged(&gotNine, 1, fwInt32, left, 9, &source, comm, nullptr) == fwSuccess, "recv 9");
    RANK_CHECK(ctx, gotNine == 900 + left && source == left, "tag 9 payload and source");
    RANK_CHECK(ctx, fwRecvTagged(gotFive.data(), big, fwFloat32, left, 5, nullptr, comm, nullptr) == fwSuccess,
               "recv 5");
    RANK_CHECK(ctx, gotFive.front() == left && gotFive.back() == left, "tag 5 payload");
    RANK_CHECK(ctx, fwWait(sends[0]) == fwSuccess && fwWait(sends[1]) == fwSuccess, "tagged sends");

    // Receives from any source: every other rank sends rank 0 two messages
    // of tag 3; rank 0 takes half of them from any source (blocking, then
    // non-blocking), the rest from each sender by name, and sees each
    // sender's messages in the order they were sent.
    const int kEach = 2;
    if (ctx.rank != 0) {
      for (int k = 0; k < kEach; ++k) {
        int32_t value = ctx.rank * 10 + k;
        RANK_CHECK(ctx, fwSendTagged(&value, 1, fwInt32, 0, 3, comm, nullptr) == fwSuccess, "send to rank 0");
      }
    } else {
      std::vector<int> taken(ctx.nranks, 0);
      auto expectNext = [&](int from, int32_t value) {
        RANK_CHECK(ctx, from > 0 && from < ctx.nranks, "source in range");
        if (from <= 0 || from >= ctx.nranks) return;
        RANK_CHECK(ctx, value == from * 10 + taken[from], "a sender's messages in order");
        ++taken[from];
      };
      const int anyCount = (ctx.nranks - 1) * kEach / 2;
      for (int i = 0; i < anyCount; ++i) {
        int32_t value = -1;
        int from = -1;
        if (i % 2 == 0) {
          RANK_CHECK(ctx, fwRecvTagged(&value, 1, fwInt32, FAIRWAY_ANY_SOURCE, 3, &from, comm, nullptr) == fwSuccess,
                     "recv from any source");
        } else {
          fwRequest_t request;
          RANK_CHECK(ctx, fwIrecvTagged(&value, 1, fwInt32, FAIRWAY_ANY_SOURCE, 3, &from, comm, &request) == fwSuccess,
                     "irecv from any source");
          failures += testUntilDone(ctx, request, "irecv from any source");
        }
        expectNext(from, value);
      }
      for (int from = 1; from < ctx.nranks; ++from) {
        while (failures == 0 && taken[from] < kEach) {
          int32_t value = -1;
          RANK_CHECK(ctx, fwRecvTagged(&value, 1, fwInt32, from, 3, nullptr, comm, nullptr) == fwSuccess,
                     "named recv after any-source ones");
          expectNext(from, value);
        }
      }
    }

    // Bad tags and peers are refused with a message, and nothing is posted.
    int32_t x = 0;
    RANK_CHECK(ctx, fwSendTagged(&x, 1, fwInt32, right, -1, comm, nullptr) == fwInvalidArgument, "negative tag");
    RANK_CHECK(ctx, fwRecvTagged(&x, 1, fwInt32, left, FAIRWAY_MAX_TAG + 1, nullptr, comm, nullptr) ==
                        fwInvalidArgument, "tag past FAIRWAY_MAX_TAG");
    RANK_CHECK(ctx, std::string(fwGetLastErrorMessage()).find("tag") != std::string::npos, "message names the tag");
    RANK_CHECK(ctx, fwSendTagged(&x, 1, fwInt32, FAIRWAY_ANY_SOURCE, 0, comm, nullptr) == fwInvalidRank,
               "a send names its peer");
    RANK_CHECK(ctx, fwIrecvTagged(&x, 1, fwInt32, FAIRWAY_ANY_SOURCE, 0, nullptr, comm, nullptr) == fwInvalidPointer,
               "no request");
    RANK_CHECK(ctx, fwBarrier(comm, nullptr) == fwSuccess, "barrier");
    return failures;
  });
}

TEST_P(OnNodeLayouts, NonBlockingManyInFlightCompleteInOrder) {
  const bool split = GetParam();
  expectAllSucceeded(runRanks(3, [split](const RankContext& ctx) {
    int failures = 0;
    poseAsNodes(ctx, split);
    fwComm_t comm;
    RANK_CHECK(ctx, fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) == fwSuccess, "init");
    const int kOps = 6;
    const size_t n = 100000;
    std::vector<std::vector<int32_t>> in(kOps, std::vector<int32_t>(n)), out(kOps, std::vector<int32_t>(n));
    std::vector<fwRequest_t> requests(kOps);
    for (int k = 0; k < kOps; ++k) {
      for (size_t i = 0; i < n; ++i) in[k][i] = static_cast<int32_t>((ctx.rank + 1) * (k + 1));
      RANK_CHECK(ctx, fwIallReduce(in[k].data(), out[k].data(), n, fwInt32, fwSum, comm, &requests[k]) == fwSuccess,
                 "iallreduce");
    }
    // A blocking call queues behind them.
    int32_t one = 1, sum = 0;
    RANK_CHECK(ctx, fwAllReduce(&one, &sum, 1, fwInt32, fwSum, comm, nullptr) == fwSuccess && sum == 3, "blocking");
    for (int k = kOps - 1; k >= 0; --k) RANK_CHECK(ctx, fwWait(requests[k]) == fwSuccess, "wait");
    for (int k = 0; k < kOps; ++k) RANK_CHECK(ctx, out[k][n - 1] == 6 * (k + 1), "result");
    fwRequest_t barrier;
    RANK_CHECK(ctx, fwIbarrier(comm, &barrier) == fwSuccess && fwWait(barrier) == fwSuccess, "ibarrier");
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    return failures;
  }));
}

TEST_P(OnNodeLayouts, BarrierNoRankLeavesBeforeAllEnter) {
  const bool split = GetParam();
  expectAllSucceeded(runRanks(4, [split](const RankContext& ctx) {
    int failures = 0;
    poseAsNodes(ctx, split);
    fwComm_t comm;
    RANK_CHECK(ctx, fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) == fwSuccess, "init");
    auto now = [] {
      return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
    std::this_thread::sleep_for(std::chrono::milliseconds(60 * ctx.rank));
    int64_t times[2];
    times[0] = now();
    RANK_CHECK(ctx, fwBarrier(comm, nullptr) == fwSuccess, "barrier");
    times[1] = now();
    std::vector<int64_t> all(2 * ctx.nranks);
    RANK_CHECK(ctx, fwAllGather(times, all.data(), 2, fwInt64, comm, nullptr) == fwSuccess, "allgather");
    int64_t lastEntry = 0;
    for (int r = 0; r < ctx.nranks; ++r) lastEntry = std::max(lastEntry, all[2 * r]);
    for (int r = 0; r < ctx.nranks; ++r) RANK_CHECK(ctx, all[2 * r + 1] >= lastEntry, "left before the last entered");
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    return failures;
  }));
}

TEST_P(OnNodeLayouts, AllToAllvUnevenBlocksWithGaps) {
  const bool split = GetParam();
  expectAllSucceeded(runRanks(3, [split](const RankContext& ctx) {
    int failures = 0;
    poseAsNodes(ctx, split);
    fwComm_t comm;
    RANK_CHECK(ctx, fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) == fwSuccess, "init");
    const int n = ctx.nranks;
    auto blockSize = [](int from, int to) { return static_cast<size_t>(1000 * (from + 1) + 7 * to); };
    std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
    size_t sendTotal = 0, recvTotal = 0;
    for (int j = 0; j < n; ++j) {
      sc[j] = blockSize(ctx.rank, j);
      sd[j] = sendTotal;
      sendTotal += sc[j] + 3;  // gaps between blocks
      rc[j] = blockSize(j, ctx.rank);
      rd[j] = recvTotal;
      recvTotal += rc[j] + 5;
    }
    std::vector<int64_t> send(sendTotal, -1), recv(recvTotal, -2);
    for (int j = 0; j < n; ++j)
      for (size_t i = 0; i < sc[j]; ++i) send[sd[j] + i] = ctx.rank * 1000000 + j * 10000 + static_cast<int64_t>(i);
    RANK_CHECK(ctx, fwAllToAllv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(), fwInt64, comm,
                                nullptr) == fwSuccess, "alltoallv");
    for (int j = 0; j < n; ++j) {
      bool ok = true;
      for (size_t i = 0; i < rc[j]; ++i) ok = ok && recv[rd[j] + i] == j * 1000000 + ctx.rank * 10000 + static_cast<int64_t>(i);
      for (size_t g = 0; g < 5; ++g) ok = ok && recv[rd[j] + rc[j] + g] == -2;  // gaps untouched
      RANK_CHECK(ctx, ok, "block from rank " + std::to_string(j));
    }
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    return failures;
  }));
}

int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// Each launcher's variables, set in the rank before fwCommInitFromEnv.
void initFromEnvironment(const char* rankVar, const char* sizeVar, bool torchStyle,
                         const std::string& secretFile = "") {
  int port = freePort();
  expectAllSucceeded(runRanks(3, [&](const RankContext& ctx) {
    int failures = 0;
    if (!secretFile.empty()) setenv("FAIRWAY_JOB_SECRET_FILE", secretFile.c_str(), 1);
    setenv(rankVar, std::to_string(ctx.rank).c_str(), 1);
    setenv(sizeVar, std::to_string(ctx.nranks).c_str(), 1);
    if (torchStyle) {
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", std::to_string(port - 1).c_str(), 1);  // root listens on MASTER_PORT + 1
    } else {
      setenv("FAIRWAY_COMM_ID", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
    }
    fwComm_t comm;
    RANK_CHECK(ctx, fwCommInitFromEnv(&comm) == fwSuccess, std::string("init from ") + rankVar);
    if (failures) return failures;
    int rank = -1;
    fwCommUserRank(comm, &rank);
    RANK_CHECK(ctx, rank == ctx.rank, "rank from the environment");
    int32_t one = 1, sum = 0;
    RANK_CHECK(ctx, fwAllReduce(&one, &sum, 1, fwInt32, fwSum, comm, nullptr) == fwSuccess && sum == 3, "allreduce");
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    return failures;
  }, RankOptions{0, /*uniqueId=*/false, {}}));
}

TEST(InitFromEnv, Fairwayrun) { initFromEnvironment("FAIRWAY_RANK", "FAIRWAY_WORLD_SIZE", false); }
TEST(InitFromEnv, Torchrun) { initFromEnvironment("RANK", "WORLD_SIZE", true); }
TEST(InitFromEnv, OpenMpi) { initFromEnvironment("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", false); }
TEST(InitFromEnv, Slurm) { initFromEnvironment("SLURM_PROCID", "SLURM_NTASKS", false); }

// The secret from a file every rank reads (a shared filesystem's, here /tmp).
TEST(InitFromEnv, SecretFromAFile) {
  char path[] = "/tmp/fairway-job-secret-XXXXXX";
  int fd = mkstemp(path);  // created 0600
  ASSERT_GE(fd, 0);
  const char secret[] = "a secret only this job's ranks can read\n";
  ASSERT_EQ(write(fd, secret, sizeof(secret) - 1), static_cast<ssize_t>(sizeof(secret) - 1));
  close(fd);
  initFromEnvironment("FAIRWAY_RANK", "FAIRWAY_WORLD_SIZE", false, path);
  unlink(path);
}

TEST(InitFromEnv, MissingLauncherSaysWhatToSet) {
  fwComm_t comm = nullptr;
  EXPECT_EQ(fwCommInitFromEnv(&comm), fwInvalidUsage);
  EXPECT_NE(std::strstr(fwGetLastErrorMessage(), "FAIRWAY_RANK"), nullptr) << fwGetLastErrorMessage();
}

// A communicator's own settings win over the environment's: a receive
// nobody answers ends after the config's timeout, not FAIRWAY_TIMEOUT_MS.
TEST(InitRankConfig, TimeoutOverridesTheEnvironmentAndBadConfigsAreRefused) {
  fwUniqueId id;
  ASSERT_EQ(fwGetUniqueId(&id), fwSuccess);
  fwComm_t comm = reinterpret_cast<fwComm_t>(0x1);
  fwConfig_t bad = FW_CONFIG_INITIALIZER;
  bad.size = 0;
  EXPECT_EQ(fwCommInitRankConfig(&comm, 1, id, 0, &bad), fwInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(std::strstr(fwGetLastErrorMessage(), "FW_CONFIG_INITIALIZER"), nullptr) << fwGetLastErrorMessage();
  bad = FW_CONFIG_INITIALIZER;
  bad.timeoutMs = -5;
  EXPECT_EQ(fwCommInitRankConfig(&comm, 1, id, 0, &bad), fwInvalidArgument);
  EXPECT_EQ(fwCommInitRankConfig(&comm, 1, id, 0, nullptr), fwInvalidPointer);

  setenv("FAIRWAY_TIMEOUT_MS", "600000", 1);
  fwConfig_t config = FW_CONFIG_INITIALIZER;
  config.timeoutMs = 300;
  ASSERT_EQ(fwCommInitRankConfig(&comm, 1, id, 0, &config), fwSuccess) << fwGetLastErrorMessage();
  unsetenv("FAIRWAY_TIMEOUT_MS");
  int value = 0;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(fwRecv(&value, 1, fwInt32, 0, comm, nullptr), fwTimeout);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_LT(waited, std::chrono::seconds(10));
  fwCommAbort(comm);
}

// Without a device runtime there is no device memory to hand out, and the
// error says why; freeing a pointer that is not device memory is refused.
TEST(MemAlloc, WithoutDeviceRuntimeSaysWhy) {
  setenv("FAIRWAY_DEVICE_RUNTIME", "none", 1);
  void* memory = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(fwMemAlloc(&memory, 1024), fwNotAvailable);
  EXPECT_EQ(memory, nullptr);
  EXPECT_NE(std::strstr(fwGetLastErrorMessage(), "FAIRWAY_DEVICE_RUNTIME=none"), nullptr) << fwGetLastErrorMessage();
  EXPECT_EQ(fwMemAlloc(nullptr, 1024), fwInvalidPointer);
  EXPECT_EQ(fwMemFree(nullptr), fwSuccess);
  int onTheStack = 0;
  EXPECT_EQ(fwMemFree(&onTheStack), fwNotAvailable);
  unsetenv("FAIRWAY_DEVICE_RUNTIME");
}

}  // namespace
}  // namespace fairway::testing
