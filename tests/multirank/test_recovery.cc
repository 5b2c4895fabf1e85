// Surviving a lost rank: a rank is killed (or stopped) inside collectives,
// every survivor learns which, revokes, shrinks, and goes on with checked
// collectives on the shrunk communicator; revocation reaches every rank;
// bad shrink arguments and survivors that disagree get their own errors.
#include <dirent.h>
#include <sys/mman.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/multirank/process_resources.h"
#include "tests/multirank/rank_harness.h"

namespace fairway::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTimeoutMs = 3000;

class Recovery : public ::testing::Test {
 protected:
  void SetUp() override { setenv("FAIRWAY_TIMEOUT_MS", std::to_string(kTimeoutMs).c_str(), 1); }
  void TearDown() override { unsetenv("FAIRWAY_TIMEOUT_MS"); }
};

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// A page every rank of a test shares (mapped before the fork): the victim
// writes the moment it dies, so survivors can time recovery from there
// (steady_clock is the same clock in every process of the host).
struct SharedClock {
  SharedClock() {
    void* page = mmap(nullptr, sizeof(int64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    at = page == MAP_FAILED ? nullptr : static_cast<int64_t*>(page);
  }
  ~SharedClock() { if (at != nullptr) munmap(at, sizeof(int64_t)); }
  void markNow() const { if (at != nullptr) *at = Clock::now().time_since_epoch().count(); }
  double msSinceMark() const {
    if (at == nullptr || *at == 0) return -1;
    return std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch() - Clock::duration(*at)).count();
  }
  int64_t* at = nullptr;
};

// count allreduces on comm, each checked element by element: rank r
// contributes r + 1 + i at index i of call k, scaled by k.
int checkedAllReduces(const RankContext& ctx, fwComm_t comm, int calls, size_t count) {
  int failures = 0, rank = -1, size = 0;
  fwCommUserRank(comm, &rank);
  fwCommCount(comm, &size);
  std::vector<float> in(count), out(count);
  for (int k = 1; k <= calls && failures == 0; ++k) {
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((rank + 1 + i % 7) * k);
    RANK_CHECK(ctx, fwAllReduce(in.data(), out.data(), count, fwFloat32, fwSum, comm, nullptr) == fwSuccess,
               "allreduce " + std::to_string(k) + " on the shrunk communicator");
    for (size_t i = 0; i < count && failures == 0; ++i) {
      const float want = static_cast<float>((size * (size + 1) / 2 + size * static_cast<int>(i % 7)) * k);
      if (out[i] != want) {
        reportFailure(ctx, "allreduce " + std::to_string(k) + " element " + std::to_string(i) + ": " +
                               std::to_string(out[i]) + ", want " + std::to_string(want));
        ++failures;
      }
    }
  }
  return failures;
}

// Once its communicators are gone, a rank listens on no TCP port: no
// bootstrap root (its own, or one made for a grow) and no transport listener lingers.
int listensOnNoPort(const RankContext& ctx) {
  int failures = 0;
  std::string ports;
  for (int port : listeningTcpPortsOfThisProcess()) ports += " " + std::to_string(port);
  RANK_CHECK(ctx, ports.empty(), "still listening on TCP port(s)" + ports);
  return failures;
}

// What a survivor does once a call fails: learn who failed, shrink, check
// the new communicator's numbering, run `calls` checked allreduces. It
// prints how long recovery took, from the failure's return and from the
// victim's end, to the first successful collective on the shrunk communicator.
int recover(const RankContext& ctx, fwComm_t comm, int victim, int calls, const SharedClock& death) {
  int failures = 0;
  const auto start = Clock::now();
  fwComm_t shrunk = nullptr;
  RANK_CHECK(ctx, fwCommShrink(comm, nullptr, 0, FAIRWAY_SHRINK_ABORT, &shrunk) == fwSuccess, "fwCommShrink");
  if (shrunk == nullptr) {
    fwCommAbort(comm);
    return failures;
  }
  int failed[8], count = 0;
  RANK_CHECK(ctx, fwCommGetFailedRanks(comm, failed, 8, &count) == fwSuccess, "fwCommGetFailedRanks");
  RANK_CHECK(ctx, std::find(failed, failed + std::min(count, 8), victim) != failed + std::min(count, 8),
             "the failed ranks do not name rank " + std::to_string(victim));
  int size = 0, rank = -1;
  fwCommCount(shrunk, &size);
  fwCommUserRank(shrunk, &rank);
  RANK_CHECK(ctx, size == ctx.nranks - 1, "the shrunk communicator has " + std::to_string(size) + " ranks");
  RANK_CHECK(ctx, rank == (ctx.rank < victim ? ctx.rank : ctx.rank - 1),
             "rank " + std::to_string(ctx.rank) + " became " + std::to_string(rank));
  float one = 1, sum = 0;
  RANK_CHECK(ctx, fwAllReduce(&one, &sum, 1, fwFloat32, fwSum, shrunk, nullptr) == fwSuccess && sum == size,
             "the first allreduce on the shrunk communicator");
  std::printf("recovery: %d ranks, rank %d: %.1f ms after the failure was reported, %.1f ms after rank %d ended\n",
              ctx.nranks, ctx.rank, msSince(start), death.msSinceMark(), victim);
  failures += checkedAllReduces(ctx, shrunk, calls, 1000);
  RANK_CHECK(ctx, fwCommDestroy(shrunk) == fwSuccess, "fwCommDestroy of the shrunk communicator");
  fwCommAbort(comm);
  return failures + listensOnNoPort(ctx);
}

// No segment of this test's ranks is left in /dev/shm.
void expectNoSegmentsLeft() {
  DIR* dir = opendir("/dev/shm");
  ASSERT_NE(dir, nullptr);
  while (dirent* entry = readdir(dir)) {
    for (int pid : forkedRankPids()) {
      const std::string prefix = "fairway-" + std::to_string(pid) + "-";
      EXPECT_NE(std::strncmp(entry->d_name, prefix.c_str(), prefix.size()), 0) << "left in /dev/shm: " << entry->d_name;
    }
  }
  closedir(dir);
}

struct KillCase {
  int ranks;
  int victim;
};

class KilledRank : public Recovery, public ::testing::WithParamInterface<KillCase> {};

// The victim dies at a random call, partway through the collectives the
// others are in (random sizes and kinds); every survivor recovers.
TEST_P(KilledRank, SurvivorsShrinkAndGoOn) {
  const KillCase c = GetParam();
  SharedClock death;
  auto outcomes = runRanks(c.ranks, [c, &death](const RankContext& ctx) {
    fwComm_t comm;
    if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) {
      reportFailure(ctx, std::string("init: ") + fwGetLastErrorMessage());
      return 1;
    }
    std::mt19937 random(static_cast<unsigned>(0x5eed + 31 * c.ranks + c.victim));  // the same calls on every rank
    const int dieAt = 2 + static_cast<int>(random() % 6);
    std::vector<float> a(1 << 16, 1.0f), b(1 << 16);
    for (int i = 0; i < 1000; ++i) {
      if (ctx.rank == c.victim && i == dieAt) {
        death.markNow();
        raise(SIGKILL);
      }
      const size_t n = 1 + random() % a.size();
      const fwResult_t r = i % 3 == 2 ? fwBroadcast(a.data(), b.data(), n / 4 + 1, fwFloat32, 0, comm, nullptr)
                                      : fwAllReduce(a.data(), b.data(), n, fwFloat32, fwSum, comm, nullptr);
      if (r == fwSuccess) continue;
      return recover(ctx, comm, c.victim, 200, death);
    }
    reportFailure(ctx, "1000 calls succeeded although a rank was killed");
    return 1;
  });
  for (int r = 0; r < c.ranks; ++r) {
    EXPECT_EQ(outcomes[r].exitCode, r == c.victim ? 128 + SIGKILL : 0) << "rank " << r;
  }
  expectNoSegmentsLeft();
}
INSTANTIATE_TEST_SUITE_P(Ranks, KilledRank,
                         ::testing::Values(KillCase{4, 2}, KillCase{4, 0}, KillCase{8, 5}, KillCase{8, 0},
                                           KillCase{16, 9}, KillCase{16, 0}),
                         [](const ::testing::TestParamInfo<KillCase>& info) {
                           return std::to_string(info.param.ranks) + "ranks_kill" + std::to_string(info.param.victim);
                         });

// Trials at 8 ranks: a random rank (rank 0 included) dies at a random
// point inside a random mix of collectives; in every other trial a second
// rank dies as the survivors start to shrink. The survivors shrink
// (calling again if a death during it leaves them with different views)
// and run 1000 checked allreduces. FAIRWAY_RECOVERY_TRIALS sets the number
// (3 by default; scripts/recovery_trials.sh runs 50).
TEST_F(Recovery, RandomKillsInRandomCollectives) {
  const char* asked = std::getenv("FAIRWAY_RECOVERY_TRIALS");
  const int trials = asked != nullptr ? std::max(1, std::atoi(asked)) : 3;
  constexpr int kRanks = 8;
  for (int trial = 0; trial < trials; ++trial) {
    std::mt19937 plan(static_cast<unsigned>(0xfa11 + trial));
    const int victim = static_cast<int>(plan() % kRanks);
    const int dieAt = 1 + static_cast<int>(plan() % 20);
    const int duringShrink = trial % 2 == 1 ? (victim + 1 + static_cast<int>(plan() % (kRanks - 1))) % kRanks : -1;
    const unsigned seed = plan();
    auto outcomes = runRanks(kRanks, [&](const RankContext& ctx) {
      int failures = 0;
      fwComm_t comm;
      if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) return 1;
      std::mt19937 calls(seed);  // the same calls on every rank
      std::vector<float> a(1 << 15, 1.0f), b(kRanks << 15);
      for (int i = 0; i < 1000; ++i) {
        if (ctx.rank == victim && i == dieAt) raise(SIGKILL);
        const size_t n = 1 + calls() % (1 << 12);
        fwResult_t r = fwSuccess;
        switch (calls() % 5) {
          case 0: r = fwAllReduce(a.data(), b.data(), n, fwFloat32, fwSum, comm, nullptr); break;
          case 1: r = fwBroadcast(a.data(), b.data(), n, fwFloat32, static_cast<int>(n % kRanks), comm, nullptr); break;
          case 2: r = fwAllGather(a.data(), b.data(), n, fwFloat32, comm, nullptr); break;
          case 3: r = fwReduceScatter(b.data(), a.data(), n, fwFloat32, fwSum, comm, nullptr); break;
          default: r = fwAllToAll(b.data(), b.data() + (kRanks << 12), n / kRanks + 1, fwFloat32, comm, nullptr); break;
        }
        if (r == fwSuccess) continue;
        if (ctx.rank == duringShrink) raise(SIGKILL);
        fwComm_t shrunk = nullptr;
        fwResult_t shrank = fwSuccess;
        for (int attempt = 0; attempt < 3; ++attempt) {
          shrank = fwCommShrink(comm, nullptr, 0, FAIRWAY_SHRINK_ABORT, &shrunk);
          if (shrank == fwSuccess) break;
        }
        RANK_CHECK(ctx, shrank == fwSuccess, "fwCommShrink");
        if (shrunk == nullptr) return failures;
        int failed[kRanks], count = 0;
        RANK_CHECK(ctx, fwCommGetFailedRanks(comm, failed, kRanks, &count) == fwSuccess, "fwCommGetFailedRanks");
        RANK_CHECK(ctx, std::find(failed, failed + std::min(count, kRanks), victim) != failed + std::min(count, kRanks),
                   "the failed ranks do not name rank " + std::to_string(victim));
        int size = 0;
        fwCommCount(shrunk, &size);
        RANK_CHECK(ctx, size == kRanks - (duringShrink >= 0 ? 2 : 1), "the shrunk size " + std::to_string(size));
        failures += checkedAllReduces(ctx, shrunk, 1000, 64);
        RANK_CHECK(ctx, fwCommDestroy(shrunk) == fwSuccess, "fwCommDestroy");
        fwCommAbort(comm);
        return failures + listensOnNoPort(ctx);
      }
      reportFailure(ctx, "1000 calls succeeded although a rank was killed");
      return failures + 1;
    });
    for (int r = 0; r < kRanks; ++r) {
      const bool killed = r == victim || r == duringShrink;
      EXPECT_EQ(outcomes[r].exitCode, killed ? 128 + SIGKILL : 0)
          << "trial " << trial << " (rank " << victim << " killed at call " << dieAt << ", rank " << duringShrink
          << " in the shrink): rank " << r;
    }
    if (::testing::Test::HasFailure()) break;
  }
  expectNoSegmentsLeft();
}

// A stopped rank is a hang, not a death: the survivors find it by the
// timeout and leave it out the same way. The harness kills it once the
// survivors have ended (RankOptions::stopForGood).
class StoppedRank : public Recovery, public ::testing::WithParamInterface<int> {};

TEST_P(StoppedRank, IsFoundByTheTimeoutAndLeftOut) {
  const int ranks = GetParam();
  SharedClock stop;
  auto outcomes = runRanks(ranks, [&stop](const RankContext& ctx) {
    fwComm_t comm;
    if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) return 1;
    std::vector<float> a(1024, 1.0f), b(1024);
    for (int i = 0; i < 100; ++i) {
      if (ctx.rank == 1 && i == 3) {
        stop.markNow();
        raise(SIGSTOP);
      }
      if (fwAllReduce(a.data(), b.data(), a.size(), fwFloat32, fwSum, comm, nullptr) == fwSuccess) continue;
      return recover(ctx, comm, 1, 50, stop);
    }
    return 1;
  }, RankOptions{8, true, {1}});
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(outcomes[r].exitCode, r == 1 ? 128 + SIGKILL : 0) << "rank " << r;
  }
}
INSTANTIATE_TEST_SUITE_P(Ranks, StoppedRank, ::testing::Values(4, 8, 16));

// fwCommRevoke on one rank makes every rank's pending and later calls
// fail with fwRevoked, though no rank failed.
TEST_F(Recovery, RevokeReachesEveryRank) {
  auto outcomes = runRanks(4, [](const RankContext& ctx) {
    int failures = 0;
    fwComm_t comm;
    if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) return 1;
    float x = 1, y = 0;
    RANK_CHECK(ctx, fwAllReduce(&x, &y, 1, fwFloat32, fwSum, comm, nullptr) == fwSuccess, "a healthy allreduce");
    const auto start = Clock::now();
    if (ctx.rank == 3) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      RANK_CHECK(ctx, fwCommRevoke(comm) == fwSuccess, "fwCommRevoke");
    } else {
      // Waits for rank 3, which revokes instead of joining.
      const fwResult_t r = fwAllReduce(&x, &y, 1, fwFloat32, fwSum, comm, nullptr);
      RANK_CHECK(ctx, r == fwRevoked, std::string("the pending call ended with ") + fwGetErrorString(r));
      RANK_CHECK(ctx, std::strstr(fwGetLastErrorMessage(), "rank 3 revoked") != nullptr, "the message names rank 3");
      RANK_CHECK(ctx, msSince(start) < kTimeoutMs / 2, "revocation took " + std::to_string(msSince(start)) + " ms");
    }
    RANK_CHECK(ctx, fwAllReduce(&x, &y, 1, fwFloat32, fwSum, comm, nullptr) == fwRevoked, "a later call");
    fwResult_t async = fwSuccess;
    fwCommGetAsyncError(comm, &async);
    RANK_CHECK(ctx, async == fwRevoked, std::string("fwCommGetAsyncError: ") + fwGetErrorString(async));
    fwCommAbort(comm);
    return failures;
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
}

// A healthy communicator shrinks too: the survivors leave out a live rank
// they name (it does not call), and the others go on.
TEST_F(Recovery, ShrinkLeavesOutANamedLiveRank) {
  auto outcomes = runRanks(4, [](const RankContext& ctx) {
    int failures = 0;
    fwComm_t comm;
    if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) return 1;
    if (ctx.rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      fwCommAbort(comm);
      return 0;
    }
    const int leaveOut = 1;
    fwComm_t shrunk = nullptr;
    RANK_CHECK(ctx, fwCommShrink(comm, &leaveOut, 1, FAIRWAY_SHRINK_DEFAULT, &shrunk) == fwSuccess, "fwCommShrink");
    if (shrunk != nullptr) {
      failures += checkedAllReduces(ctx, shrunk, 20, 100);
      fwCommDestroy(shrunk);
    }
    fwCommAbort(comm);
    return failures;
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
}

// Survivors that name different ranks to leave out are told so, naming the
// lists. Rank 2, which rank 0 leaves out, never hears rank 0; it sees the
// others leave (their processes exit) and may go on alone.
TEST_F(Recovery, SurvivorsThatDisagreeAreRefused) {
  auto outcomes = runRanks(3, [](const RankContext& ctx) {
    int failures = 0;
    fwComm_t comm;
    if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) return 1;
    const int leaveOut = 2;
    fwComm_t shrunk = nullptr;
    const fwResult_t r = ctx.rank == 0 ? fwCommShrink(comm, &leaveOut, 1, FAIRWAY_SHRINK_DEFAULT, &shrunk)
                                       : fwCommShrink(comm, nullptr, 0, FAIRWAY_SHRINK_DEFAULT, &shrunk);
    if (ctx.rank == 2) {
      int size = 0;
      if (shrunk != nullptr) fwCommCount(shrunk, &size);
      RANK_CHECK(ctx, r != fwSuccess || size == 1, "rank 2 joined a communicator of " + std::to_string(size));
      if (shrunk != nullptr) fwCommDestroy(shrunk);
      fwCommAbort(comm);
      return failures;
    }
    RANK_CHECK(ctx, r == fwInvalidUsage, std::string("fwCommShrink gave ") + fwGetErrorString(r));
    RANK_CHECK(ctx, std::strstr(fwGetLastErrorMessage(), "different lists") != nullptr, "the message says why");
    RANK_CHECK(ctx, shrunk == nullptr, "a communicator was made");
    fwCommAbort(comm);
    return failures;
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
}

// A page the test's processes share (mapped before the fork), through
// which one process publishes a unique id to another that is not yet in
// any communicator with it: what a job's store or launcher does.
struct SharedIdBox {
  struct Slot {
    std::atomic<int> ready;
    fwUniqueId id;
  };
  SharedIdBox() {
    void* page = mmap(nullptr, sizeof(Slot) * 2, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    slots = page == MAP_FAILED ? nullptr : static_cast<Slot*>(page);
  }
  ~SharedIdBox() { if (slots != nullptr) munmap(slots, sizeof(Slot) * 2); }
  void publish(int slot, const fwUniqueId& id) const {
    slots[slot].id = id;
    slots[slot].ready.store(1);
  }
  // Waits for the id, at most twice the timeout.
  bool take(int slot, fwUniqueId* id) const {
    const auto start = Clock::now();
    while (slots[slot].ready.load() == 0) {
      if (msSince(start) > 2 * kTimeoutMs) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    *id = slots[slot].id;
    return true;
  }
  Slot* slots = nullptr;
};

// Equal on every rank of comm: what rank 0 of comm holds (the broadcast
// a replacement receives its parameters by), checked element by element.
int holdsWhatRankZeroHolds(const RankContext& ctx, fwComm_t comm, std::vector<float>& params) {
  int failures = 0, rank = -1;
  fwCommUserRank(comm, &rank);
  std::vector<float> got(params.size());
  RANK_CHECK(ctx, fwBroadcast(params.data(), got.data(), params.size(), fwFloat32, 0, comm, nullptr) == fwSuccess,
             "the broadcast of the parameters");
  if (rank != 0) params = got;
  std::vector<float> all(params.size() * 4);
  int size = 0;
  fwCommCount(comm, &size);
  all.resize(params.size() * size);
  RANK_CHECK(ctx, fwAllGather(params.data(), all.data(), params.size(), fwFloat32, comm, nullptr) == fwSuccess,
             "the allgather of the parameters");
  for (int r = 1; r < size && failures == 0; ++r) {
    RANK_CHECK(ctx, std::memcmp(all.data(), all.data() + r * params.size(), params.size() * sizeof(float)) == 0,
               "rank " + std::to_string(r) + " holds other parameters than rank 0");
  }
  return failures;
}

// The full cycle at 4 ranks: rank 0 (the bootstrap root's host) is killed,
// the 3 survivors shrink, and a replacement process that was in no
// communicator joins them through fwCommGrow with an id a survivor made;
// the 4 ranks then hold the same parameters and run checked collectives.
TEST_F(Recovery, AReplacementJoinsTheSurvivors) {
  SharedIdBox box;  // slot 0: the first communicator's id, slot 1: the grow id
  SharedClock death;
  constexpr int kRanks = 4, kReplacement = 4, kVictim = 0;
  auto outcomes = runRanks(kRanks + 1, [&](const RankContext& ctx) {
    int failures = 0;
    std::vector<float> params(4096);
    for (size_t i = 0; i < params.size(); ++i) params[i] = static_cast<float>(i % 97) * (ctx.rank + 1);
    fwUniqueId growId;
    if (ctx.rank == kReplacement) {
      if (!box.take(1, &growId)) {
        reportFailure(ctx, "no grow id was published");
        return 1;
      }
      const auto start = Clock::now();
      fwComm_t grown = nullptr;
      RANK_CHECK(ctx, fwCommGrow(nullptr, kRanks, growId, kRanks - 1, &grown) == fwSuccess, "fwCommGrow (joining)");
      if (grown == nullptr) return failures;
      std::printf("grow: the replacement joined %.1f ms after it got the id\n", msSince(start));
      failures += holdsWhatRankZeroHolds(ctx, grown, params);
      failures += checkedAllReduces(ctx, grown, 200, 1000);
      RANK_CHECK(ctx, fwCommDestroy(grown) == fwSuccess, "fwCommDestroy of the grown communicator");
      return failures + listensOnNoPort(ctx);
    }
    fwUniqueId firstId;
    if (ctx.rank == 0) {
      RANK_CHECK(ctx, fwGetUniqueId(&firstId) == fwSuccess, "fwGetUniqueId");
      box.publish(0, firstId);
    } else if (!box.take(0, &firstId)) {
      reportFailure(ctx, "no id for the first communicator");
      return 1;
    }
    fwComm_t comm = nullptr;
    if (fwCommInitRank(&comm, kRanks, firstId, ctx.rank) != fwSuccess) {
      reportFailure(ctx, std::string("init: ") + fwGetLastErrorMessage());
      return 1;
    }
    std::vector<float> a(1 << 12, 1.0f), b(1 << 12);
    for (int i = 0; i < 100; ++i) {
      if (ctx.rank == kVictim && i == 5) {
        death.markNow();
        raise(SIGKILL);
      }
      if (fwAllReduce(a.data(), b.data(), a.size(), fwFloat32, fwSum, comm, nullptr) == fwSuccess) continue;
      fwComm_t shrunk = nullptr;
      RANK_CHECK(ctx, fwCommShrink(comm, nullptr, 0, FAIRWAY_SHRINK_ABORT, &shrunk) == fwSuccess, "fwCommShrink");
      if (shrunk == nullptr) return failures;
      int rank = -1;
      fwCommUserRank(shrunk, &rank);
      // A survivor makes the grow id, gives it to the other survivors over
      // the shrunk communicator and to the replacement out of band.
      if (rank == 0) {
        RANK_CHECK(ctx, fwGetUniqueId(&growId) == fwSuccess, "fwGetUniqueId for the grow");
        box.publish(1, growId);
      }
      RANK_CHECK(ctx, fwBroadcast(&growId, &growId, sizeof(growId), fwUint8, 0, shrunk, nullptr) == fwSuccess,
                 "the broadcast of the grow id");
      fwComm_t grown = nullptr;
      RANK_CHECK(ctx, fwCommGrow(shrunk, kRanks, growId, FAIRWAY_GROW_MEMBER, &grown) == fwSuccess,
                 "fwCommGrow (member)");
      if (grown == nullptr) return failures;
      int grownRank = -1, grownSize = 0;
      fwCommUserRank(grown, &grownRank);
      fwCommCount(grown, &grownSize);
      RANK_CHECK(ctx, grownRank == rank && grownSize == kRanks,
                 "rank " + std::to_string(rank) + " became rank " + std::to_string(grownRank) + " of " +
                     std::to_string(grownSize));
      if (rank == 0) {
        std::printf("grow: 4 ranks again %.1f ms after rank %d ended\n", death.msSinceMark(), kVictim);
      }
      failures += holdsWhatRankZeroHolds(ctx, grown, params);
      failures += checkedAllReduces(ctx, grown, 200, 1000);
      RANK_CHECK(ctx, fwCommDestroy(grown) == fwSuccess, "fwCommDestroy of the grown communicator");
      // The shrunk communicator stays as it was.
      failures += checkedAllReduces(ctx, shrunk, 5, 100);
      RANK_CHECK(ctx, fwCommDestroy(shrunk) == fwSuccess, "fwCommDestroy of the shrunk communicator");
      fwCommAbort(comm);
      return failures + listensOnNoPort(ctx);
    }
    reportFailure(ctx, "100 calls succeeded although a rank was killed");
    return failures + 1;
  }, RankOptions{0, false, {}});
  for (int r = 0; r <= kRanks; ++r) {
    EXPECT_EQ(outcomes[r].exitCode, r == kVictim ? 128 + SIGKILL : 0) << "rank " << r;
  }
  expectNoSegmentsLeft();
}

// A grow id serves fwCommGrow only, members keep their ranks, and joining
// processes take the ranks after them: each misuse fails on every rank,
// naming it, and makes nothing.
TEST_F(Recovery, MisusedGrowIsRefusedOnEveryRank) {
  SharedIdBox box;
  auto outcomes = runRanks(3, [&](const RankContext& ctx) {
    int failures = 0;
    fwComm_t pair = nullptr;
    fwUniqueId pairId, growId;
    // Ranks 0 and 1 form a communicator; rank 2 is outside it.
    if (ctx.rank == 0) {
      RANK_CHECK(ctx, fwGetUniqueId(&pairId) == fwSuccess, "fwGetUniqueId");
      box.publish(0, pairId);
    }
    if (ctx.rank == 1 && !box.take(0, &pairId)) return 1;
    if (ctx.rank < 2) RANK_CHECK(ctx, fwCommInitRank(&pair, 2, pairId, ctx.rank) == fwSuccess, "init of the pair");
    // 1. The outside process calls fwCommInitRank with the grow id.
    if (ctx.rank == 0) {
      RANK_CHECK(ctx, fwGetUniqueId(&growId) == fwSuccess, "fwGetUniqueId for the grow");
      box.publish(1, growId);
    }
    if (ctx.rank != 0 && !box.take(1, &growId)) return 1;
    fwComm_t made = nullptr;
    const fwResult_t r = ctx.rank < 2 ? fwCommGrow(pair, 3, growId, FAIRWAY_GROW_MEMBER, &made)
                                      : fwCommInitRank(&made, 3, growId, 2);
    RANK_CHECK(ctx, r == fwInvalidUsage, std::string("a grow joined by fwCommInitRank gave ") + fwGetErrorString(r));
    RANK_CHECK(ctx, std::strstr(fwGetLastErrorMessage(), "called fwCommInitRank") != nullptr, "the message says why");
    RANK_CHECK(ctx, made == nullptr, "a communicator was made");
    // Arguments each rank checks alone.
    if (ctx.rank == 0) {
      RANK_CHECK(ctx, fwCommGrow(pair, 2, growId, FAIRWAY_GROW_MEMBER, &made) == fwInvalidArgument, "nranks 2");
      RANK_CHECK(ctx, fwCommGrow(pair, 3, growId, 0, &made) == fwInvalidArgument, "a member's rank");
      RANK_CHECK(ctx, fwCommGrow(nullptr, 3, growId, FAIRWAY_GROW_MEMBER, &made) == fwInvalidArgument,
                 "a joiner without a rank");
      RANK_CHECK(ctx, fwCommGrow(nullptr, 3, growId, 3, &made) == fwInvalidRank, "a joiner's rank 3 of 3");
      RANK_CHECK(ctx, fwCommGrow(pair, 3, growId, FAIRWAY_GROW_MEMBER, nullptr) == fwInvalidPointer, "newcomm NULL");
      fwUniqueId garbage;
      std::memset(&garbage, 0x5a, sizeof(garbage));
      RANK_CHECK(ctx, fwCommGrow(pair, 3, garbage, FAIRWAY_GROW_MEMBER, &made) != fwSuccess, "a made-up id");
      RANK_CHECK(ctx, made == nullptr, "a communicator was made");
    }
    if (pair != nullptr) RANK_CHECK(ctx, fwCommDestroy(pair) == fwSuccess, "fwCommDestroy");
    return failures;
  }, RankOptions{0, false, {}});
  for (int r = 0; r < 3; ++r) EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
}

// An id made but not used frees its port at once when released, and a
// rank already waiting on it is told why instead of waiting out the timeout.
TEST_F(Recovery, AnUnusedIdIsReleased) {
  const std::vector<int> before = listeningTcpPortsOfThisProcess();
  fwUniqueId id;
  ASSERT_EQ(fwGetUniqueId(&id), fwSuccess) << fwGetLastErrorMessage();
  EXPECT_EQ(listeningTcpPortsOfThisProcess().size(), before.size() + 1);
  fwResult_t joined = fwSuccess;
  double joinMs = 0;
  std::thread waiter([&] {
    const auto start = Clock::now();
    fwComm_t comm = nullptr;
    joined = fwCommInitRank(&comm, 2, id, 1);  // rank 0 never comes
    joinMs = msSince(start);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(fwReleaseUniqueId(id), fwSuccess) << fwGetLastErrorMessage();
  waiter.join();
  EXPECT_NE(joined, fwSuccess);
  EXPECT_LT(joinMs, kTimeoutMs / 2) << "the waiting rank was not told";
  for (int i = 0; i < 100 && listeningTcpPortsOfThisProcess().size() > before.size(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(listeningTcpPortsOfThisProcess(), before);
  EXPECT_EQ(fwReleaseUniqueId(id), fwInvalidUsage);
  EXPECT_NE(std::strstr(fwGetLastErrorMessage(), "not running in this process"), nullptr) << fwGetLastErrorMessage();
  fwUniqueId garbage;
  std::memset(&garbage, 0x5a, sizeof(garbage));
  EXPECT_EQ(fwReleaseUniqueId(garbage), fwInvalidArgument);
}

// Bad arguments get their own codes, and nothing is made.
TEST_F(Recovery, BadShrinkArgumentsAreRefused) {
  fwUniqueId id;
  ASSERT_EQ(fwGetUniqueId(&id), fwSuccess);
  fwComm_t comm = nullptr;
  ASSERT_EQ(fwCommInitRank(&comm, 1, id, 0), fwSuccess) << fwGetLastErrorMessage();
  fwComm_t shrunk = reinterpret_cast<fwComm_t>(0x1);
  const int self = 0, outside = 5;
  EXPECT_EQ(fwCommShrink(comm, nullptr, 0, 0, nullptr), fwInvalidPointer);
  EXPECT_EQ(fwCommShrink(comm, nullptr, -1, 0, &shrunk), fwInvalidArgument);
  EXPECT_EQ(shrunk, nullptr);
  EXPECT_EQ(fwCommShrink(comm, nullptr, 1, 0, &shrunk), fwInvalidPointer);
  EXPECT_EQ(fwCommShrink(comm, &outside, 1, 0, &shrunk), fwInvalidRank);
  EXPECT_EQ(fwCommShrink(comm, &self, 1, 0, &shrunk), fwInvalidArgument);
  EXPECT_NE(std::strstr(fwGetLastErrorMessage(), "excludes itself"), nullptr) << fwGetLastErrorMessage();
  EXPECT_EQ(fwCommShrink(comm, nullptr, 0, 4, &shrunk), fwInvalidArgument);
  EXPECT_EQ(fwCommShrink(nullptr, nullptr, 0, 0, &shrunk), fwInvalidComm);
  int count = -1;
  EXPECT_EQ(fwCommGetFailedRanks(comm, nullptr, 0, &count), fwSuccess);
  EXPECT_EQ(count, 0);
  EXPECT_EQ(fwCommGetFailedRanks(comm, nullptr, 2, &count), fwInvalidPointer);
  EXPECT_EQ(fwCommGetFailedRanks(comm, nullptr, 0, nullptr), fwInvalidPointer);
  EXPECT_EQ(fwCommRevoke(nullptr), fwInvalidComm);
  EXPECT_EQ(fwCommDestroy(comm), fwSuccess);
}

}  // namespace
}  // namespace fairway::testing
