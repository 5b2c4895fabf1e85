// Completion notifications (fwRequestOnComplete): each runs exactly once,
// on a Fairway thread when nobody waits, on the waiter's thread when one
// does, and with the error when the communicator goes first.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/multirank/api_test_helpers.h"

namespace fairway::testing {
namespace {

// What one notification saw.
struct Seen {
  std::atomic<int> runs{0};
  std::atomic<int> result{-1};
  std::thread::id thread;
  std::string message;
  std::vector<int>* order = nullptr;  // collectives: the call order in which they completed
  std::mutex* orderMutex = nullptr;
  int index = 0;
};

void record(fwResult_t result, void* arg) {
  Seen* seen = static_cast<Seen*>(arg);
  seen->thread = std::this_thread::get_id();
  seen->message = fwGetLastErrorMessage();
  if (seen->order != nullptr) {
    std::lock_guard<std::mutex> lock(*seen->orderMutex);
    seen->order->push_back(seen->index);
  }
  seen->result.store(result);
  seen->runs.fetch_add(1);
}

// Waits (at most 30 s) for a notification to have run.
bool ranWithin30s(const Seen& seen) {
  const auto giveUp = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (seen.runs.load() == 0 && std::chrono::steady_clock::now() < giveUp) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return seen.runs.load() > 0;
}

bool allRan(const std::vector<Seen>& seen) {
  for (const Seen& s : seen) {
    if (!ranWithin30s(s)) return false;
  }
  return true;
}

// Ranks 1 and 2 post and ask to be told before rank 0 posts anything (it
// waits for their "ready"), so none of their collectives can complete
// before its notification is in place: each must be told on a Fairway
// thread. Rank 0's may complete before it asks, and are then told inside
// fwRequestOnComplete, as documented.
TEST(CompletionNotification, CollectivesAreToldInCallOrderWithoutAnyoneWaiting) {
  runWithComm(3, false, [](const RankContext& ctx, fwComm_t comm) {
    int failures = 0;
    const int kOps = 8;
    const size_t n = 50000;
    std::vector<std::vector<int32_t>> in(kOps, std::vector<int32_t>(n)), out(kOps, std::vector<int32_t>(n));
    std::vector<Seen> seen(kOps);
    std::vector<int> order;
    std::mutex orderMutex;
    std::vector<fwRequest_t> requests(kOps);
    std::vector<bool> toldInsideTheCall(kOps, false);
    int32_t ready = 1;
    if (ctx.rank == 0) {
      for (int peer = 1; peer < ctx.nranks; ++peer) {
        RANK_CHECK(ctx, fwRecv(&ready, 1, fwInt32, peer, comm, nullptr) == fwSuccess, "ready from a peer");
      }
    }
    for (int k = 0; k < kOps; ++k) {
      for (size_t i = 0; i < n; ++i) in[k][i] = (ctx.rank + 1) * (k + 1);
      seen[k].order = &order;
      seen[k].orderMutex = &orderMutex;
      seen[k].index = k;
      RANK_CHECK(ctx, fwIallReduce(in[k].data(), out[k].data(), n, fwInt32, fwSum, comm, &requests[k]) == fwSuccess,
                 "iallreduce");
      RANK_CHECK(ctx, fwRequestOnComplete(requests[k], record, &seen[k]) == fwSuccess, "notify");
      toldInsideTheCall[k] = seen[k].runs.load() == 1 && seen[k].thread == std::this_thread::get_id();
    }
    if (ctx.rank != 0) RANK_CHECK(ctx, fwSend(&ready, 1, fwInt32, 0, comm, nullptr) == fwSuccess, "ready to rank 0");
    RANK_CHECK(ctx, allRan(seen), "every notification ran within 30 s");
    for (int k = 0; k < kOps; ++k) {
      RANK_CHECK(ctx, seen[k].runs.load() == 1, "ran exactly once");
      RANK_CHECK(ctx, seen[k].result.load() == fwSuccess, "succeeded");
      if (ctx.rank != 0 || !toldInsideTheCall[k]) {
        RANK_CHECK(ctx, seen[k].thread != std::this_thread::get_id(), "on a Fairway thread");
      }
      RANK_CHECK(ctx, out[k][n - 1] == 6 * (k + 1), "result in place when told");
      // Released once its notification has returned: a fwTest just before
      // then reports the result, and a later one finds the request gone.
      int done = 0;
      fwResult_t tested = fwTest(requests[k], &done);
      for (int tries = 0; tested == fwSuccess && tries < 1000; ++tries) {
        RANK_CHECK(ctx, done == 1, "complete while not yet released");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        tested = fwTest(requests[k], &done);
      }
      RANK_CHECK(ctx, tested == fwInvalidArgument, "released once told");
    }
    RANK_CHECK(ctx, order == std::vector<int>({0, 1, 2, 3, 4, 5, 6, 7}), "in call order");
    return failures;
  });
}

TEST(CompletionNotification, AWaiterRunsItOnceOnItsOwnThread) {
  runWithComm(2, false, [](const RankContext& ctx, fwComm_t comm) {
    int failures = 0;
    const int peer = 1 - ctx.rank;
    const size_t n = 1 << 18;
    std::vector<float> out(n, static_cast<float>(ctx.rank)), in(n, -1.0f);
    Seen sendSeen, recvSeen;
    fwRequest_t send, recv;
    RANK_CHECK(ctx, fwIrecv(in.data(), n, fwFloat32, peer, comm, &recv) == fwSuccess, "irecv");
    RANK_CHECK(ctx, fwRequestOnComplete(recv, record, &recvSeen) == fwSuccess, "notify recv");
    if (ctx.rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 1 waits first
    RANK_CHECK(ctx, fwIsend(out.data(), n, fwFloat32, peer, comm, &send) == fwSuccess, "isend");
    RANK_CHECK(ctx, fwRequestOnComplete(send, record, &sendSeen) == fwSuccess, "notify send");
    const fwResult_t waited = fwWait(recv);
    // Whoever completed it told exactly once; a fwWait that got there first told on this thread.
    RANK_CHECK(ctx, waited == fwSuccess || waited == fwInvalidArgument, "wait recv");
    RANK_CHECK(ctx, recvSeen.runs.load() == 1, "recv told once, by the time its wait returned");
    if (waited == fwSuccess) RANK_CHECK(ctx, recvSeen.thread == std::this_thread::get_id(), "told on the waiter's thread");
    RANK_CHECK(ctx, recvSeen.result.load() == fwSuccess, "recv succeeded");
    bool ok = true;
    for (size_t i = 0; i < n; ++i) ok = ok && in[i] == static_cast<float>(peer);
    RANK_CHECK(ctx, ok, "payload");
    RANK_CHECK(ctx, ranWithin30s(sendSeen) && sendSeen.runs.load() == 1 && sendSeen.result.load() == fwSuccess,
               "send told once, untested");
    return failures;
  });
}

TEST(CompletionNotification, AReceiveFromAnySourceIsMatchedAndToldWithoutATest) {
  runWithComm(3, false, [](const RankContext& ctx, fwComm_t comm) {
    int failures = 0;
    if (ctx.rank == 0) {
      std::vector<int32_t> got(2, -1);
      std::vector<int> sources(2, -1);
      std::vector<Seen> seen(2);
      for (int i = 0; i < 2; ++i) {
        fwRequest_t r;
        RANK_CHECK(ctx, fwIrecvTagged(&got[i], 1, fwInt32, FAIRWAY_ANY_SOURCE, 4, &sources[i], comm, &r) == fwSuccess,
                   "irecv any");
        RANK_CHECK(ctx, fwRequestOnComplete(r, record, &seen[i]) == fwSuccess, "notify");
      }
      RANK_CHECK(ctx, allRan(seen), "both told within 30 s");
      for (int i = 0; i < 2; ++i) {
        RANK_CHECK(ctx, seen[i].result.load() == fwSuccess && seen[i].runs.load() == 1, "told once");
        RANK_CHECK(ctx, (sources[i] == 1 || sources[i] == 2) && got[i] == 100 + sources[i], "sender and payload");
      }
      RANK_CHECK(ctx, sources[0] != sources[1], "one from each");
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(30 * ctx.rank));
      const int32_t value = 100 + ctx.rank;
      RANK_CHECK(ctx, fwSendTagged(&value, 1, fwInt32, 0, 4, comm, nullptr) == fwSuccess, "send");
    }
    return failures;
  });
}

TEST(CompletionNotification, DestroyingTheCommunicatorTellsWhatIsPendingWithTheError) {
  expectAllSucceeded(runRanks(2, [](const RankContext& ctx) {
    int failures = 0;
    fwComm_t comm;
    RANK_CHECK(ctx, fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) == fwSuccess, "init");
    int32_t never = 0;
    Seen seen;
    fwRequest_t r;
    // Nobody sends tag 99.
    RANK_CHECK(ctx, fwIrecvTagged(&never, 1, fwInt32, 1 - ctx.rank, 99, nullptr, comm, &r) == fwSuccess, "irecv");
    RANK_CHECK(ctx, fwRequestOnComplete(r, record, &seen) == fwSuccess, "notify");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    RANK_CHECK(ctx, seen.runs.load() == 0, "not told while pending");
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    RANK_CHECK(ctx, seen.runs.load() == 1, "told by the destroy");
    RANK_CHECK(ctx, seen.result.load() != fwSuccess, "with an error");
    RANK_CHECK(ctx, seen.message.find("destroyed") != std::string::npos, "naming why: " + seen.message);
    return failures;
  }));
}

TEST(CompletionNotification, BadRequestsAreRefusedByName) {
  runWithComm(1, false, [](const RankContext& ctx, fwComm_t comm) {
    int failures = 0;
    Seen seen;
    RANK_CHECK(ctx, fwRequestOnComplete(nullptr, record, &seen) == fwInvalidPointer, "NULL request");
    int32_t a = 1, b = 0;
    fwRequest_t r;
    RANK_CHECK(ctx, fwIallReduce(&a, &b, 1, fwInt32, fwSum, comm, &r) == fwSuccess, "iallreduce");
    RANK_CHECK(ctx, fwRequestOnComplete(r, nullptr, nullptr) == fwInvalidPointer, "NULL fn");
    RANK_CHECK(ctx, std::string(fwGetLastErrorMessage()).find("fn is NULL") != std::string::npos, "names fn");
    RANK_CHECK(ctx, fwWait(r) == fwSuccess && b == 1, "wait");
    RANK_CHECK(ctx, fwRequestOnComplete(r, record, &seen) == fwInvalidArgument, "released request");
    RANK_CHECK(ctx, seen.runs.load() == 0, "never told");
    // A request takes one notification; the first is kept and runs once.
    fwRequest_t r2;
    int32_t never = 0;
    RANK_CHECK(ctx, fwIrecvTagged(&never, 1, fwInt32, 0, 3, nullptr, comm, &r2) == fwSuccess, "irecv");
    RANK_CHECK(ctx, fwRequestOnComplete(r2, record, &seen) == fwSuccess, "first");
    RANK_CHECK(ctx, fwRequestOnComplete(r2, record, &seen) == fwInvalidUsage, "second refused");
    const int32_t value = 5;
    RANK_CHECK(ctx, fwSendTagged(&value, 1, fwInt32, 0, 3, comm, nullptr) == fwSuccess, "self send");
    RANK_CHECK(ctx, ranWithin30s(seen) && seen.runs.load() == 1 && never == 5, "the first told once");
    return failures;
  });
}

}  // namespace
}  // namespace fairway::testing
