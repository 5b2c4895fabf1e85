// The wait policy (p2p/wait_policy.h): how long waits spin, by their
// history and by whether the core is wanted.
#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "p2p/wait_policy.h"

namespace fairway {
namespace {

using Clock = WaitPolicy::Clock;
using std::chrono::microseconds;

double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

TEST(WaitPolicy, WaitsSpinForAFewTimesTheirTypicalLength) {
  ContentionWatch quiet;
  WaitPolicy policy(WaitMode::Adaptive, 2000, false, quiet);
  for (int i = 0; i < 64; ++i) policy.record(microseconds(30));
  EXPECT_NEAR(us(policy.spinBudget(Clock::now())), 120, 1);
  for (int i = 0; i < 64; ++i) policy.record(microseconds(2));
  EXPECT_EQ(policy.spinBudget(Clock::now()), WaitPolicy::kMinSpin) << "never below the cost of sleeping";
  for (int i = 0; i < 64; ++i) policy.record(microseconds(300));
  EXPECT_NEAR(us(policy.spinBudget(Clock::now())), 1200, 1);
}

TEST(WaitPolicy, WaitsLikelyToOutlastTheWindowSleepSoon) {
  ContentionWatch quiet;
  WaitPolicy policy(WaitMode::Adaptive, 2000, false, quiet);
  for (int i = 0; i < 64; ++i) policy.record(microseconds(20));
  for (int i = 0; i < 16; ++i) policy.record(std::chrono::milliseconds(3));  // a peer computing between calls
  EXPECT_EQ(policy.spinBudget(Clock::now()), WaitPolicy::kMinSpin);
  for (int i = 0; i < 32; ++i) policy.record(microseconds(20));
  const double again = us(policy.spinBudget(Clock::now()));
  EXPECT_GT(again, 80) << "short again: spins again";
  EXPECT_LT(again, 400);
}

TEST(WaitPolicy, SpinUsCapsEveryBudgetAndSpinModeOrOversubscriptionAlwaysTakesIt) {
  ContentionWatch wanted;
  wanted.saw(Clock::now());
  WaitPolicy none(WaitMode::Adaptive, 0, false);
  EXPECT_EQ(none.spinBudget(Clock::now()), Clock::duration::zero());
  WaitPolicy little(WaitMode::Adaptive, 20, false);
  EXPECT_EQ(little.spinBudget(Clock::now()), microseconds(20)) << "below the least spin: the cap wins";
  WaitPolicy dedicated(WaitMode::Spin, 2000, false, wanted);
  for (int i = 0; i < 64; ++i) dedicated.record(std::chrono::milliseconds(3));
  EXPECT_EQ(dedicated.spinBudget(Clock::now()), microseconds(2000)) << "whatever the history and contention";
  ContentionWatch quiet;
  WaitPolicy oversubscribed(WaitMode::Adaptive, 2000, true, quiet);
  for (int i = 0; i < 64; ++i) oversubscribed.record(std::chrono::milliseconds(3));
  EXPECT_EQ(oversubscribed.spinBudget(Clock::now()), microseconds(2000))
      << "more ranks than CPUs: the ranks yield to each other for the whole window";
  WaitPolicy busyNeighbours(WaitMode::Adaptive, 2000, true, wanted);
  EXPECT_EQ(busyNeighbours.spinBudget(Clock::now()), WaitPolicy::kMinSpin)
      << "unless something that keeps the core for its time slice wants it";
}

TEST(WaitPolicy, ContentionMakesWaitsSpinBriefly) {
  ContentionWatch watch;
  WaitPolicy policy(WaitMode::Adaptive, 2000, false, watch);
  for (int i = 0; i < 64; ++i) policy.record(microseconds(40));
  const Clock::time_point at = Clock::now();
  policy.sawContention(at);
  EXPECT_EQ(policy.spinBudget(at + microseconds(10)), WaitPolicy::kMinSpin);
  EXPECT_NEAR(us(policy.spinBudget(at + ContentionWatch::kContendedFor + microseconds(1))), 160, 1)
      << "contention is forgotten after a while";
}

// A wait that spins on a CPU where another thread is ready to run is
// preempted sooner or later (oversubscribed: a yield hands the core to the
// busy thread, which keeps it for its time slice); the first such wait
// marks the cores wanted, and every later wait in the process then spins
// briefly.
void expectASpinnerNoticesABusyThreadOnItsCore(bool oversubscribed) {
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  int cpu = -1;
  for (int c = 0; c < CPU_SETSIZE && cpu < 0; ++c) {
    if (CPU_ISSET(c, &mine)) cpu = c;
  }
  ASSERT_GE(cpu, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
  ContentionWatch watch;
  WaitPolicy policy(WaitMode::Adaptive, 2000, oversubscribed, watch);
  bool noticed = false;
  const Clock::time_point giveUp = Clock::now() + std::chrono::seconds(5);
  while (!noticed && Clock::now() < giveUp) {
    policy.record(microseconds(190));  // waits that are worth spinning for
    SpinningWait wait(policy);         // a peer that never comes within the budget
    while (wait.keepSpinning(Clock::now())) {
      for (int poll = 0; poll < 32; ++poll) wait.idle();
    }
    noticed = watch.wanted(Clock::now());
  }
  stop = true;
  busy.join();
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(mine), &mine), 0);
  EXPECT_TRUE(noticed) << "a spinner sharing its core with a busy thread never saw itself preempted in 5 s";
}

TEST(WaitPolicy, ASpinnerPreemptedOnASharedCoreNoticesIt) { expectASpinnerNoticesABusyThreadOnItsCore(false); }

TEST(WaitPolicy, AnOversubscribedSpinnerNoticesAThreadThatKeepsTheCore) {
  expectASpinnerNoticesABusyThreadOnItsCore(true);
}

}  // namespace
}  // namespace fairway
