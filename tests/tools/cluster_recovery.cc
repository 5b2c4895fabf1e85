// One rank of a recovery run on the emulated cluster (scripts/emulate_cluster.sh
// gives each rank its launcher variables): checked allreduces, mostly small
// with a large one every 25th call (two-phase where the nodes are even),
// while the ranks named by --kill RANK@CALL (original ranks) SIGKILL
// themselves before that call. Survivors shrink (FAIRWAY_SHRINK_ABORT,
// again if a death during the agreement leaves them apart), redo the
// failed call on the shrunk communicator and go on; after the last death
// they run --calls more checked allreduces. Each survivor prints how long
// each recovery took and, at the end, "rank R: ok"; the exit status is the
// number of failures (capped).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fairway/fairway.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Kill {
  int rank;
  int call;
};

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Call k on a communicator of `size`: rank r contributes (r + 1) * (k % 5 + 1) + i % 7 at index i.
bool checkedAllReduce(fwComm_t comm, int k, std::vector<float>& in, std::vector<float>& out, size_t count,
                      int* wrong) {
  int rank = 0, size = 0;
  fwCommUserRank(comm, &rank);
  fwCommCount(comm, &size);
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((rank + 1) * (k % 5 + 1) + static_cast<int>(i % 7));
  if (fwAllReduce(in.data(), out.data(), count, fwFloat32, fwSum, comm, nullptr) != fwSuccess) return false;
  for (size_t i = 0; i < count; ++i) {
    const float want = static_cast<float>(size * (size + 1) / 2 * (k % 5 + 1) + size * static_cast<int>(i % 7));
    if (out[i] != want) ++*wrong;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Kill> kills;
  int finalCalls = 1000;
  for (int i = 1; i < argc; ++i) {
    Kill k{};
    if (std::strcmp(argv[i], "--kill") == 0 && i + 1 < argc && std::sscanf(argv[i + 1], "%d@%d", &k.rank, &k.call) == 2) {
      kills.push_back(k);
      ++i;
    } else if (std::strcmp(argv[i], "--calls") == 0 && i + 1 < argc) {
      finalCalls = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--kill RANK@CALL]... [--calls N]\n", argv[0]);
      return 2;
    }
  }
  fwComm_t comm = nullptr;
  if (fwCommInitFromEnv(&comm) != fwSuccess) {
    std::fprintf(stderr, "init: %s\n", fwGetLastErrorMessage());
    return 1;
  }
  int original = 0;
  fwCommUserRank(comm, &original);
  int lastKill = 0;
  for (const Kill& k : kills) lastKill = std::max(lastKill, k.call);
  const size_t kLarge = size_t{1} << 20, kSmall = 1024;
  std::vector<float> in(kLarge), out(kLarge);
  int wrong = 0, failures = 0, recoveries = 0;
  const int totalCalls = lastKill + finalCalls;
  for (int call = 0; call < totalCalls && failures == 0;) {
    for (const Kill& k : kills) {
      if (k.rank == original && k.call == call) raise(SIGKILL);
    }
    if (checkedAllReduce(comm, call, in, out, call % 25 == 24 ? kLarge : kSmall, &wrong)) {
      ++call;
      continue;
    }
    const auto start = Clock::now();
    fwComm_t shrunk = nullptr;
    fwResult_t shrank = fwSuccess;
    for (int attempt = 0; attempt < 3 && shrunk == nullptr; ++attempt) {
      shrank = fwCommShrink(comm, nullptr, 0, FAIRWAY_SHRINK_ABORT, &shrunk);
    }
    if (shrunk == nullptr) {
      std::fprintf(stderr, "rank %d: fwCommShrink: %s: %s\n", original, fwGetErrorString(shrank),
                   fwGetLastErrorMessage());
      ++failures;
      break;
    }
    int failed[64], count = 0, size = 0, rank = 0;
    fwCommGetFailedRanks(comm, failed, 64, &count);
    fwCommAbort(comm);
    comm = shrunk;
    fwCommCount(comm, &size);
    fwCommUserRank(comm, &rank);
    // The failed call again, on the shrunk communicator: recovery ends with its success.
    if (!checkedAllReduce(comm, call, in, out, call % 25 == 24 ? kLarge : kSmall, &wrong)) {
      std::fprintf(stderr, "rank %d: the first call after the shrink: %s\n", original, fwGetLastErrorMessage());
      ++failures;
      break;
    }
    ++recoveries;
    std::string lost;
    for (int i = 0; i < std::min(count, 64); ++i) lost += (lost.empty() ? "" : ",") + std::to_string(failed[i]);
    std::printf("rank %d: call %d: lost rank(s) {%s}; now rank %d of %d, %.1f ms from the failed call to the "
                "first allreduce on the shrunk communicator\n",
                original, call, lost.c_str(), rank, size, msSince(start));
    ++call;
  }
  if (failures == 0 && fwCommDestroy(comm) != fwSuccess) ++failures;
  if (wrong > 0) std::fprintf(stderr, "rank %d: %d wrong elements\n", original, wrong);
  if (failures == 0 && wrong == 0) {
    std::printf("rank %d: ok: %d recoveries, %d checked allreduces, 0 wrong\n", original, recoveries, totalCalls);
  }
  return std::min(100, failures + (wrong > 0 ? 1 : 0));
}
