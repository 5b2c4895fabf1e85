// Flight records and fairway-trace on 8 forked ranks: each test makes a
// job go wrong in one way (a rank late, a rank calling another collective,
// a rank stopped or killed while its collectives run, a rank skipping one
// call of a thousand, a rank that never sends what a peer receives), lets
// every rank dump where it fails
// (FAIRWAY_TRACE_DIR), and checks that fairway-trace's first paragraph
// names that rank. A healthy job's dumps (by the call and by the signal)
// read as nothing wrong; a running rank's status names the call it is in
// and the rank it waits on.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/multirank/rank_harness.h"

namespace fairway::testing {
namespace {

constexpr int kRanks = 8;
constexpr int kTimeoutMs = 2000;

struct TraceRun {
  int exitCode = -1;
  std::string output;
  std::string summary;  // the first paragraph
};

// fairway-trace ARGS (a directory, or --status PID DIR), its output and exit status.
TraceRun runFairwayTrace(const std::string& args) {
  TraceRun run;
  const std::string command = std::string(FAIRWAY_TRACE_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.output.append(buffer, n);
  const int status = pclose(pipe);
  run.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  const size_t end = run.output.find("\n\n");
  run.summary = run.output.substr(0, end);
  return run;
}

int dumpsIn(const std::string& dir) {
  const std::string command = "ls " + dir + " | grep -c fairway_rank";
  FILE* pipe = popen(command.c_str(), "r");
  int count = 0;
  if (pipe != nullptr) {
    if (fscanf(pipe, "%d", &count) != 1) count = 0;
    pclose(pipe);
  }
  return count;
}

class Trace : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/fairway-trace-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    setenv("FAIRWAY_TRACE_DIR", dir_.c_str(), 1);
    setenv("FAIRWAY_TIMEOUT_MS", std::to_string(kTimeoutMs).c_str(), 1);
  }
  void TearDown() override {
    unsetenv("FAIRWAY_TRACE_DIR");
    unsetenv("FAIRWAY_TIMEOUT_MS");
    if (!::testing::Test::HasFailure()) (void)!system(("rm -rf " + dir_).c_str());
  }
  // The first paragraph names exactly these ranks as the culprit.
  void expectCulprit(const std::string& ranks) {
    const TraceRun run = runFairwayTrace(dir_);
    EXPECT_EQ(run.exitCode, 1) << run.output;
    EXPECT_EQ(run.summary.rfind("Culprit: " + ranks + ".", 0), 0u) << run.output;
    std::printf("fairway-trace: %s\n", run.summary.c_str());
    lastRun_ = run;
  }
  std::string dir_;
  TraceRun lastRun_;
};

// Allreduces of count floats until one fails or `calls` are done.
int allReduces(fwComm_t comm, int calls, size_t count) {
  std::vector<float> in(count, 1.0f), out(count);
  for (int i = 0; i < calls; ++i) {
    if (fwAllReduce(in.data(), out.data(), count, fwFloat32, fwSum, comm, nullptr) != fwSuccess) return i;
  }
  return calls;
}

TEST_F(Trace, HealthyJobDumpsByCallAndSignalAndReadsAsNothingWrong) {
  const std::string dir = dir_;
  auto outcomes = runRanks(4, [&dir](const RankContext& ctx) {
    int failures = 0;
    fwComm_t comm;
    if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) return 1;
    RANK_CHECK(ctx, allReduces(comm, 50, 256) == 50, "allreduces");
    RANK_CHECK(ctx, fwCommDumpTrace(comm, nullptr) == fwSuccess, "fwCommDumpTrace");
    if (ctx.rank == 1) {
      // The signal's dump replaces the call's (same file), written by the library's thread.
      const std::string file = dir + "/pid" + std::to_string(getpid()) + ".fairway_rank1";
      struct stat before {};
      RANK_CHECK(ctx, stat(file.c_str(), &before) == 0, "the call's dump");
      raise(SIGUSR1);
      bool replaced = false;
      for (int i = 0; i < 500 && !replaced; ++i) {
        struct stat now {};
        replaced = stat(file.c_str(), &now) == 0 && now.st_ino != before.st_ino;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      RANK_CHECK(ctx, replaced, "the signal's dump");
    }
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    return failures;
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
  EXPECT_EQ(dumpsIn(dir_), 4);
  const TraceRun run = runFairwayTrace(dir_);
  EXPECT_EQ(run.exitCode, 0) << run.output;
  EXPECT_EQ(run.summary.rfind("Nothing wrong", 0), 0u) << run.output;
}

TEST_F(Trace, RankThatCallsLateIsNamed) {
  auto outcomes = runRanks(kRanks, [](const RankContext& ctx) {
    fwComm_t comm;
    if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) return 1;
    allReduces(comm, 10, 256);
    if (ctx.rank == 5) std::this_thread::sleep_for(std::chrono::milliseconds(2 * kTimeoutMs));
    const bool failed = allReduces(comm, 1, 256) == 0;
    fwCommAbort(comm);
    // The late rank may still find every input it needs, the others' having
    // arrived before they gave up: its call can succeed.
    return failed || ctx.rank == 5 ? 0 : 1;
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
  expectCulprit("rank 5");
  EXPECT_NE(lastRun_.summary.find("rank 5 posted collective #"), std::string::npos) << lastRun_.output;
  EXPECT_NE(lastRun_.summary.find(" late; rank 5 posted it 4."), std::string::npos) << lastRun_.output;
}

TEST_F(Trace, RankThatCallsAnotherCollectiveIsNamed) {
  auto outcomes = runRanks(kRanks, [](const RankContext& ctx) {
    fwComm_t comm;
    if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) return 1;
    allReduces(comm, 4, 256);
    std::vector<float> in(256, 1.0f), out(256 * kRanks);
    const fwResult_t result = ctx.rank == 3
                                  ? fwAllGather(in.data(), out.data(), 256, fwFloat32, comm, nullptr)
                                  : fwAllReduce(in.data(), out.data(), 256, fwFloat32, fwSum, comm, nullptr);
    fwCommAbort(comm);
    return result != fwSuccess ? 0 : 1;
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
  expectCulprit("rank 3");
  EXPECT_NE(lastRun_.summary.find("rank 3 calls allgather (count 256, float)"), std::string::npos)
      << lastRun_.output;
}

TEST_F(Trace, RankStoppedWhileItsCollectivesRunIsNamed) {
  auto outcomes = runRanks(kRanks, [](const RankContext& ctx) {
    fwComm_t comm;
    if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) return 1;
    allReduces(comm, 3, 256);
    std::thread stopper;
    if (ctx.rank == 2) {
      stopper = std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        raise(SIGSTOP);
      });
    }
    const bool failed = allReduces(comm, 1000000, 65536) < 1000000;
    if (stopper.joinable()) stopper.join();
    fwCommAbort(comm);
    return failed ? 0 : 1;
  }, RankOptions{0, true, {2}});
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(outcomes[r].exitCode, r == 2 ? 128 + SIGKILL : 0) << "rank " << r;
  EXPECT_EQ(dumpsIn(dir_), kRanks - 1);
  expectCulprit("rank 2");
  EXPECT_NE(lastRun_.summary.find("rank 2 of communicator"), std::string::npos) << lastRun_.output;
}

TEST_F(Trace, KilledRankIsNamed) {
  auto outcomes = runRanks(kRanks, [](const RankContext& ctx) {
    fwComm_t comm;
    if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) return 1;
    allReduces(comm, 3, 256);
    if (ctx.rank == 6) raise(SIGKILL);
    const bool failed = allReduces(comm, 10, 256) < 10;
    fwCommAbort(comm);
    return failed ? 0 : 1;
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(outcomes[r].exitCode, r == 6 ? 128 + SIGKILL : 0) << "rank " << r;
  expectCulprit("rank 6");
}

TEST_F(Trace, RankThatSkipsOneCallOfAThousandIsNamed) {
  auto outcomes = runRanks(kRanks, [](const RankContext& ctx) {
    fwComm_t comm;
    if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) return 1;
    std::vector<float> in(2, 1.0f), out(2);
    bool failed = false;
    for (int i = 0; i < 1000 && !failed; ++i) {
      if (ctx.rank == 4 && i == 500) continue;
      failed = fwAllReduce(in.data(), out.data(), 2, fwFloat32, fwSum, comm, nullptr) != fwSuccess;
    }
    // Rank 4 runs out of calls first and goes on to the next collective.
    if (!failed) failed = fwBarrier(comm, nullptr) != fwSuccess;
    fwCommAbort(comm);
    return failed ? 0 : 1;
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
  expectCulprit("rank 4");
  EXPECT_NE(lastRun_.summary.find("rank 4 calls barrier"), std::string::npos) << lastRun_.output;
}

TEST_F(Trace, RankThatNeverSendsIsNamed) {
  auto outcomes = runRanks(4, [](const RankContext& ctx) {
    fwComm_t comm;
    if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) return 1;
    std::vector<float> buf(4);
    bool failed = true;
    if (ctx.rank == 0) failed = fwRecv(buf.data(), buf.size(), fwFloat32, 3, comm, nullptr) != fwSuccess;
    // The others stay (and do not abort) until rank 0 has timed out.
    if (ctx.rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(2 * kTimeoutMs));
    fwCommAbort(comm);
    return failed ? 0 : 1;
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
  expectCulprit("rank 3");
  EXPECT_NE(lastRun_.summary.find("rank 0's recv (count 4, float, from rank 3)"), std::string::npos)
      << lastRun_.output;
  EXPECT_NE(lastRun_.summary.find("rank 3 did not send within"), std::string::npos) << lastRun_.output;
  EXPECT_NE(lastRun_.summary.find("Rank 3 has no send to rank 0 open."), std::string::npos) << lastRun_.output;
}

// fairway-trace --status on a rank waiting in an allreduce for a peer
// that has not called it yet: the call in flight and the rank it waits on,
// the job untouched (both ranks then complete the call).
TEST_F(Trace, StatusOfARunningRankShowsItsCallInFlightAndWhomItWaitsOn) {
  setenv("FAIRWAY_TIMEOUT_MS", "20000", 1);
  void* page = mmap(nullptr, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  auto* waiterPid = static_cast<volatile int*>(page);
  *waiterPid = 0;
  const std::string dir = dir_;
  auto outcomes = runRanks(2, [&](const RankContext& ctx) {
    int failures = 0;
    fwComm_t comm;
    if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) return 1;
    if (ctx.rank == 0) *waiterPid = getpid();
    if (ctx.rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(600));  // rank 0 waits in the allreduce meanwhile
      const TraceRun status = runFairwayTrace("--status " + std::to_string(*waiterPid) + " " + dir);
      std::printf("fairway-trace --status:\n%s", status.output.c_str());
      RANK_CHECK(ctx, status.exitCode == 0, "the status query's exit status");
      RANK_CHECK(ctx, status.output.find("in flight: collective #3 allreduce (count 256, float, sum): started") !=
                          std::string::npos, "the call in flight");
      RANK_CHECK(ctx, status.output.find("waiting on rank 1 since") != std::string::npos, "whom it waits on");
    }
    RANK_CHECK(ctx, allReduces(comm, 1, 256) == 1, "the allreduce after the query");
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    return failures;
  });
  munmap(page, sizeof(int));
  for (int r = 0; r < 2; ++r) EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
}

// A job hung but not yet timed out, every rank dumped by the signal (as
// `kill -USR1` on each would): the ranks waiting in the allreduce name
// the one that has not called it, and fairway-trace names it too.
TEST_F(Trace, HungJobDumpedBySignalNamesTheRankNotYetInTheCall) {
  setenv("FAIRWAY_TIMEOUT_MS", "20000", 1);
  void* page = mmap(nullptr, 4 * sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  auto* pids = static_cast<volatile int*>(page);
  for (int r = 0; r < 4; ++r) pids[r] = 0;
  const std::string dir = dir_;
  auto outcomes = runRanks(4, [&](const RankContext& ctx) {
    int failures = 0;
    fwComm_t comm;
    if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) return 1;
    pids[ctx.rank] = getpid();
    RANK_CHECK(ctx, allReduces(comm, 5, 256) == 5, "the first allreduces");
    if (ctx.rank == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the others wait in the next allreduce
      for (int r = 0; r < 4; ++r) kill(pids[r], SIGUSR1);
      for (int i = 0; i < 300 && dumpsIn(dir) < 4; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      RANK_CHECK(ctx, dumpsIn(dir) == 4, "every rank's dump on the signal");
    }
    RANK_CHECK(ctx, allReduces(comm, 1, 256) == 1, "the allreduce rank 2 came late to");
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    return failures;
  });
  munmap(page, 4 * sizeof(int));
  for (int r = 0; r < 4; ++r) EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
  expectCulprit("rank 2");
  EXPECT_NE(lastRun_.summary.find("rank 2 never posted collective #8"), std::string::npos) << lastRun_.output;
  EXPECT_NE(lastRun_.summary.find("ranks 0, 1 and 3 were still in it at the dump, waiting on rank 2"),
            std::string::npos) << lastRun_.output;
}

TEST_F(Trace, UnreadableDirectoryAndFilesGetMessagesNotCrashes) {
  const TraceRun none = runFairwayTrace(dir_ + "/does-not-exist");
  EXPECT_EQ(none.exitCode, 2) << none.output;
  EXPECT_NE(none.output.find("does-not-exist"), std::string::npos) << none.output;
  FILE* junk = fopen((dir_ + "/pid1.fairway_rank0").c_str(), "w");
  ASSERT_NE(junk, nullptr);
  fputs("not a pickle", junk);
  fclose(junk);
  const TraceRun bad = runFairwayTrace(dir_);
  EXPECT_EQ(bad.exitCode, 2) << bad.output;
  EXPECT_NE(bad.output.find("pid1.fairway_rank0: not a readable dump"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace fairway::testing
