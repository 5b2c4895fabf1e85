// Runs a test body on N ranks as forked processes joined by a real
// bootstrap and UCX. Each rank returns its failure count; the parent waits
// (bounded) and reports every rank that failed, crashed or hung.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "fairway/fairway.h"

namespace fairway::testing {

struct RankContext {
  int rank;
  int nranks;
  fwUniqueId id;
};

struct RankOutcome {
  int exitCode = 0;    // the body's failure count (capped), 128+signal if killed
  bool timedOut = false;
};

struct RankOptions {
  // Ranks still running after this long are described (threads, stacks)
  // and killed. 0: FAIRWAY_TEST_STALL_S from the environment (CMake sets it
  // below each test's ctest timeout, so the description is always printed),
  // else 240.
  int stallSeconds = 0;
  // Whether rank 0 makes a unique id (starting the bootstrap root in its
  // process) for ctx.id; tests that form communicators from a launcher's
  // variables need none.
  bool uniqueId = true;
  // Ranks the body stops for good (SIGSTOP, a peer that hangs): once every
  // other rank has ended they are killed at once, their outcome 128+SIGKILL,
  // instead of being waited for until the stall limit.
  std::vector<int> stopForGood;
};

// Forks nranks processes that each run body; returns one outcome per rank.
// Fork-safe: the ranks are forked before any Fairway thread exists (rank 0
// makes the unique id after the fork and hands it to the others through
// pipes), so no child inherits a lock another thread held at the fork.
std::vector<RankOutcome> runRanks(int nranks, const std::function<int(const RankContext&)>& body,
                                  RankOptions options = {});

// Every rank process runRanks has forked in this process so far: what a
// test left behind can be told from what a test running beside it (ctest
// -j) has made.
const std::vector<int>& forkedRankPids();

// A line of context for a failed check, printed by the rank that saw it.
void reportFailure(const RankContext& ctx, const std::string& what);

// In a rank body that counts `failures`: on a false cond, reports what and
// the library's last error message, and counts one failure.
#define RANK_CHECK(ctx, cond, what)                                                             \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      ::fairway::testing::reportFailure(ctx, std::string(what) + ": " + fwGetLastErrorMessage()); \
      ++failures;                                                                               \
    }                                                                                           \
  } while (0)

// Buffers with guard bytes on both sides, to catch writes past the end.
// data() is what calls take; host() is where the test fills and checks
// it. For host memory they are the same. With device = true the storage
// comes from fwMemAlloc (the communicators' device runtime: a GPU, or the
// host-emulated runtime of CI) and host() is a mirror of all of it, guards
// included: toDevice() before the call, fromDevice() after it.
// data() is NULL if the allocation failed. Every byte between the guards
// starts as `fill`.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes, bool device = false, unsigned char fill = 0);
  ~GuardedBuffer();
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  void* data() { return storage_ ? storage_ + kGuard : nullptr; }
  unsigned char* host() { return mirror_ ? mirror_ + kGuard : nullptr; }
  // The host() address of a pointer into data().
  void* hostOf(const void* inData) { return host() + (static_cast<const unsigned char*>(inData) - storage_ - kGuard); }
  size_t size() const { return bytes_; }
  bool toDevice();    // the mirror, guards included, into the device buffer (nothing for host memory)
  bool fromDevice();  // the device buffer into the mirror
  bool guardsIntact() const;  // in the mirror: call fromDevice() first for device memory

 private:
  static constexpr size_t kGuard = 64;
  unsigned char* storage_;
  unsigned char* mirror_;
  size_t bytes_;
  bool device_;
};

}  // namespace fairway::testing
