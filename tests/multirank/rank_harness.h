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

// Forks nranks processes that each run body; returns one outcome per rank.
// The parent kills ranks still running after timeoutSeconds.
std::vector<RankOutcome> runRanks(int nranks, const std::function<int(const RankContext&)>& body,
                                  int timeoutSeconds = 240);

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
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes);
  ~GuardedBuffer();
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  void* data() { return storage_ + kGuard; }
  size_t size() const { return bytes_; }
  bool guardsIntact() const;

 private:
  static constexpr size_t kGuard = 64;
  unsigned char* storage_;
  size_t bytes_;
};

}  // namespace fairway::testing
