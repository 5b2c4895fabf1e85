// The executor's posts (comm/executor.h): lazy while callers claim their
// jobs, waking the worker at once for a while after one they did not.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "comm/executor.h"

namespace fairway {
namespace {

using Clock = std::chrono::steady_clock;

// Waits (sleeping, so the doorbell gets a core) until operation is done.
bool doneWithin5s(AsyncOperation& operation) {
  const Clock::time_point until = Clock::now() + std::chrono::seconds(5);
  while (!operation.isDone() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return operation.isDone();
}

// A job that notes the thread it ran on.
std::function<Status()> noting(std::thread::id* ranOn) {
  return [ranOn] {
    *ranOn = std::this_thread::get_id();
    return Status::ok();
  };
}

TEST(Executor, ALazyPostNobodyWaitsForRunsOnTheWorker) {
  Executor executor;
  ASSERT_EQ(executor.postsWakingTheWorker(), 0) << "the first post is lazy";
  std::thread::id ranOn;
  auto operation = executor.submit(noting(&ranOn));
  ASSERT_TRUE(doneWithin5s(*operation)) << "the doorbell woke the worker";
  EXPECT_NE(ranOn, std::this_thread::get_id());
  EXPECT_TRUE(operation->wait().isOk());
  EXPECT_EQ(executor.postsWakingTheWorker(), Executor::kWakingPostsAfterAMiss);
}

TEST(Executor, MissesInARowDoubleThePostsThatWakeTheWorker) {
  Executor executor;
  for (int miss = 0; miss < 3; ++miss) {
    ASSERT_EQ(executor.postsWakingTheWorker(), 0);
    std::thread::id ranOn;
    auto lazy = executor.submit(noting(&ranOn));
    ASSERT_TRUE(doneWithin5s(*lazy));
    ASSERT_EQ(executor.postsWakingTheWorker(), Executor::kWakingPostsAfterAMiss << miss);
    // Posts that wake the worker, whoever runs them, count down to the next lazy one.
    const int waking = executor.postsWakingTheWorker();
    for (int k = 0; k < waking; ++k) {
      auto woken = executor.submit([] { return Status::ok(); });
      ASSERT_TRUE(woken->wait().isOk());
      EXPECT_EQ(executor.postsWakingTheWorker(), waking - k - 1);
    }
  }
}

TEST(Executor, ACallerWhoClaimsItsLazyPostKeepsPostsLazy) {
  Executor executor;
  // The caller waits at once; it may lose a race to the doorbell's grace
  // when preempted, so some of many posts in a row must run here.
  int here = 0;
  for (int k = 0; k < 200 && here < 20; ++k) {
    const bool lazy = executor.postsWakingTheWorker() == 0;
    std::thread::id ranOn;
    auto operation = executor.submit(noting(&ranOn));
    ASSERT_TRUE(operation->wait().isOk());
    if (lazy && ranOn == std::this_thread::get_id()) {
      ++here;
      EXPECT_EQ(executor.postsWakingTheWorker(), 0) << "a claimed lazy post leaves the next one lazy";
    }
  }
  EXPECT_EQ(here, 20) << "a caller waiting at once runs its own jobs";
}

}  // namespace
}  // namespace fairway
