#include "tests/multirank/rank_harness.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace fairway::testing {
namespace {

// What a stalled rank is doing, printed before it is killed: the kernel's
// wait channel of each thread and, where gdb or cuda-gdb is installed,
// every thread's stack (a stall inside a third-party library, CUDA's or
// UCX's, shows up nowhere else).
void describeStalledRank(pid_t pid) {
  const std::string p = std::to_string(pid);
  const std::string command =
      "for t in /proc/" + p + "/task/*; do echo \"  thread ${t##*/}: $(cat $t/comm) waits in $(cat $t/wchan)\"; done; "
      "gdb=$(command -v gdb || command -v cuda-gdb); "
      "[ -z \"$gdb\" ] || timeout 30 \"$gdb\" -q -batch -p " + p +
      " -ex 'thread apply all bt 25' 2>/dev/null | grep -E '^(#|Thread)'";
  std::fflush(stderr);
  if (std::system(("{ " + command + "; } >&2").c_str()) != 0) std::fprintf(stderr, "  (no stack available)\n");
}

}  // namespace

std::vector<RankOutcome> runRanks(int nranks, const std::function<int(const RankContext&)>& body, int timeoutSeconds) {
  fwUniqueId id;
  std::vector<RankOutcome> outcomes(nranks);
  if (fwGetUniqueId(&id) != fwSuccess) {
    std::fprintf(stderr, "fwGetUniqueId: %s\n", fwGetLastErrorMessage());
    for (auto& o : outcomes) o.exitCode = 1;
    return outcomes;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids(nranks);
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int failures = body(RankContext{r, nranks, id});
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(failures > 100 ? 100 : failures);
    }
    pids[r] = pid;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSeconds);
  int running = nranks;
  while (running > 0) {
    for (int r = 0; r < nranks; ++r) {
      if (pids[r] <= 0) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        outcomes[r].exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pids[r] = -1;
        --running;
      }
    }
    if (running > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < nranks; ++r) {
        if (pids[r] <= 0) continue;
        std::fprintf(stderr, "rank %d still running after %d s: killing it; it was here:\n", r, timeoutSeconds);
        describeStalledRank(pids[r]);
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        outcomes[r].timedOut = true;
        outcomes[r].exitCode = 128 + SIGKILL;
        pids[r] = -1;
        --running;
      }
    }
    if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return outcomes;
}

void reportFailure(const RankContext& ctx, const std::string& what) {
  std::fprintf(stderr, "[rank %d/%d] %s\n", ctx.rank, ctx.nranks, what.c_str());
}

GuardedBuffer::GuardedBuffer(size_t bytes) : bytes_(bytes) {
  storage_ = static_cast<unsigned char*>(std::malloc(bytes + 2 * kGuard));
  std::memset(storage_, 0xA5, kGuard);
  std::memset(storage_ + kGuard + bytes, 0xA5, kGuard);
}

GuardedBuffer::~GuardedBuffer() { std::free(storage_); }

bool GuardedBuffer::guardsIntact() const {
  for (size_t i = 0; i < kGuard; ++i) {
    if (storage_[i] != 0xA5 || storage_[kGuard + bytes_ + i] != 0xA5) return false;
  }
  return true;
}

}  // namespace fairway::testing
