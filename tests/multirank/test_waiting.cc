// Waits share the cores with the job around them (p2p/wait_policy.h): a
// rank waiting for a late peer leaves its core to a compute thread that
// needs it, and nothing of Fairway's runs while nothing is outstanding.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/multirank/api_test_helpers.h"

namespace fairway::testing {
namespace {

using Clock = std::chrono::steady_clock;

// The CPUs this process may run on, ascending.
std::vector<int> allowedCpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

bool pinCallingThread(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0;
}

// Iterations per second of a busy loop on a thread pinned to cpu while
// `during` runs on the calling thread.
double computeRate(int cpu, const std::function<void()>& during) {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> count{0};
  std::thread compute([&] {
    pinCallingThread(cpu);
    uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      if ((++n & 1023) == 0) count.store(n, std::memory_order_relaxed);
    }
    count.store(n);
  });
  const Clock::time_point start = Clock::now();
  during();
  stop = true;
  compute.join();
  return static_cast<double>(count.load()) / std::chrono::duration<double>(Clock::now() - start).count();
}

// Rank 0 shares one CPU with a compute thread and makes allreduces that
// rank 1 (on another CPU) joins 2 ms late each time: the compute thread
// must keep at least 0.8 of the rate it has alone on that CPU, measured
// just before and after (spinning through each wait halves it:
// FAIRWAY_WAIT=spin gives about 0.5). Best of three tries, as other
// processes may take the CPU during one.
TEST(Waiting, ARankWaitingForALatePeerLeavesItsCoreToTheJob) {
  const std::vector<int> cpus = allowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs (one shared by rank 0 and its compute thread)";
  runWithComm(2, false, [&](const RankContext& ctx, fwComm_t comm) {
    int failures = 0;
    const int cpu = ctx.rank == 0 ? cpus[0] : cpus[1];
    RANK_CHECK(ctx, pinCallingThread(cpu), "pin");
    const int kCalls = 40;
    const double kNearly = 0.8;
    const auto kLate = std::chrono::milliseconds(2);
    float value = 1.0f, sum = 0.0f;
    auto together = [&] { return fwAllReduce(&value, &sum, 1, fwFloat32, fwSum, comm, nullptr) == fwSuccess; };
    double best = 0.0;
    for (int attempt = 0; attempt < 3; ++attempt) {
      RANK_CHECK(ctx, together(), "start of a try");
      if (ctx.rank == 0) {
        const double alone = computeRate(cpu, [] { std::this_thread::sleep_for(std::chrono::milliseconds(80)); });
        RANK_CHECK(ctx, together(), "rank 0 measured alone");
        const double waiting = computeRate(cpu, [&] {
          for (int k = 0; k < kCalls; ++k) RANK_CHECK(ctx, together(), "allreduce with a late peer");
        });
        const double aloneAgain = computeRate(cpu, [] { std::this_thread::sleep_for(std::chrono::milliseconds(80)); });
        best = std::max(best, waiting / ((alone + aloneAgain) / 2));
      } else {
        RANK_CHECK(ctx, together(), "rank 0 measured alone");
        for (int k = 0; k < kCalls; ++k) {
          std::this_thread::sleep_for(kLate);
          RANK_CHECK(ctx, together(), "allreduce, late");
        }
      }
      // Rank 0 says whether it has its answer.
      value = ctx.rank == 0 && best >= kNearly ? 1.0f : 0.0f;
      RANK_CHECK(ctx, together(), "verdict");
      value = 1.0f;
      if (sum > 0.5f) break;
    }
    if (ctx.rank == 0) {
      std::fprintf(stderr, "compute thread beside a waiting rank: %.2f of its rate alone\n", best);
      RANK_CHECK(ctx, best >= kNearly,
                 "the compute thread kept only " + std::to_string(best) + " of its rate beside a waiting rank");
    }
    return failures;
  });
}

// A non-blocking collective runs while its caller computes and makes no
// call into Fairway: posting rings the doorbell, which wakes the worker
// (comm/executor.h). Rank 0 posts and then spins for 2 s (each of its
// CPUs busy, so the doorbell's SCHED_IDLE class must still get its turn);
// rank 1's blocking allreduce with it must end long before that.
TEST(Waiting, ANonBlockingCollectiveRunsWhileItsCallerComputes) {
  runWithComm(2, false, [](const RankContext& ctx, fwComm_t comm) {
    int failures = 0;
    std::vector<float> in(1 << 12, 1.0f), out(in.size(), 0.0f);
    fwRequest_t request;
    // The worker exists and sleeps: a first non-blocking call started it.
    RANK_CHECK(ctx, fwIallReduce(in.data(), out.data(), 1, fwFloat32, fwSum, comm, &request) == fwSuccess, "first");
    RANK_CHECK(ctx, fwWait(request) == fwSuccess, "first wait");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto kComputing = std::chrono::seconds(2);
    if (ctx.rank == 0) {
      RANK_CHECK(ctx, fwIallReduce(in.data(), out.data(), in.size(), fwFloat32, fwSum, comm, &request) == fwSuccess,
                 "iallreduce");
      std::atomic<bool> stop{false};
      std::thread other([&] {
        while (!stop.load(std::memory_order_relaxed)) {
        }
      });
      const Clock::time_point until = Clock::now() + kComputing;
      while (Clock::now() < until) {
      }
      stop = true;
      other.join();
      RANK_CHECK(ctx, fwWait(request) == fwSuccess, "wait");
      RANK_CHECK(ctx, out.back() == 2.0f, "sum");
    } else {
      const Clock::time_point start = Clock::now();
      RANK_CHECK(ctx, fwAllReduce(in.data(), out.data(), in.size(), fwFloat32, fwSum, comm, nullptr) == fwSuccess,
                 "allreduce");
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      std::fprintf(stderr, "allreduce with a computing peer's non-blocking one: %.4f s\n", seconds);
      RANK_CHECK(ctx, seconds < 1.0,
                 "took " + std::to_string(seconds) + " s: the peer's collective waited for its wait");
    }
    return failures;
  });
}

// Nanoseconds each thread of this process has run so far, by thread id.
// The calling thread is left out: it only sleeps, and what it ran is this
// reading of /proc itself (7 of 11 ms in a second under ASan).
std::map<std::string, uint64_t> threadCpuNanos() {
  std::map<std::string, uint64_t> ran;
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return ran;
  const std::string self = std::to_string(static_cast<long>(syscall(SYS_gettid)));
  while (dirent* entry = readdir(tasks)) {
    const std::string tid = entry->d_name;
    if (tid == "." || tid == ".." || tid == self) continue;
    std::ifstream stat("/proc/self/task/" + tid + "/schedstat");
    uint64_t ns = 0;
    if (stat >> ns) {
      std::string name;
      std::ifstream comm("/proc/self/task/" + tid + "/comm");
      std::getline(comm, name);
      ran[tid + " (" + name + ")"] = ns;
    }
  }
  closedir(tasks);
  return ran;
}

// After blocking and non-blocking collectives and messages (so the worker
// and the progress thread exist and have worked), a second with nothing
// outstanding costs the library's threads (every thread but the caller's,
// which sleeps) under 1% of a CPU.
TEST(Waiting, NoThreadRunsWhileNothingIsOutstanding) {
  runWithComm(2, false, [](const RankContext& ctx, fwComm_t comm) {
    int failures = 0;
    std::vector<float> in(1 << 16, 1.0f), out(1 << 16);
    RANK_CHECK(ctx, fwAllReduce(in.data(), out.data(), in.size(), fwFloat32, fwSum, comm, nullptr) == fwSuccess,
               "allreduce");
    fwRequest_t requests[3];
    RANK_CHECK(ctx, fwIallReduce(in.data(), out.data(), in.size(), fwFloat32, fwSum, comm, &requests[0]) == fwSuccess,
               "iallreduce");
    RANK_CHECK(ctx, fwWait(requests[0]) == fwSuccess, "wait iallreduce");
    const int peer = 1 - ctx.rank;
    std::vector<float> got(in.size());
    RANK_CHECK(ctx, fwIrecv(got.data(), got.size(), fwFloat32, peer, comm, &requests[1]) == fwSuccess, "irecv");
    RANK_CHECK(ctx, fwIsend(in.data(), in.size(), fwFloat32, peer, comm, &requests[2]) == fwSuccess, "isend");
    RANK_CHECK(ctx, fwWait(requests[1]) == fwSuccess && fwWait(requests[2]) == fwSuccess, "messages");
    RANK_CHECK(ctx, fwAllReduce(in.data(), out.data(), 1, fwFloat32, fwSum, comm, nullptr) == fwSuccess, "together");

    const std::map<std::string, uint64_t> before = threadCpuNanos();
    const Clock::time_point start = Clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const std::map<std::string, uint64_t> after = threadCpuNanos();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    uint64_t total = 0;
    std::string busiest;
    uint64_t most = 0;
    for (const auto& [thread, ns] : after) {
      const auto earlier = before.find(thread);
      const uint64_t used = ns - (earlier == before.end() ? 0 : earlier->second);
      total += used;
      if (used > most) {
        most = used;
        busiest = thread;
      }
    }
    RANK_CHECK(ctx, total < static_cast<uint64_t>(0.01 * seconds * 1e9),
               "threads ran " + std::to_string(total / 1000) + " us in an idle " + std::to_string(seconds) +
                   " s (most: " + busiest + ", " + std::to_string(most / 1000) + " us)");
    RANK_CHECK(ctx, fwAllReduce(in.data(), out.data(), 1, fwFloat32, fwSum, comm, nullptr) == fwSuccess, "after");
    return failures;
  });
}

}  // namespace
}  // namespace fairway::testing
