#include "tests/multirank/rank_harness.h"

#include <dirent.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "tests/multirank/test_device.h"

namespace fairway::testing {
namespace {

using Clock = std::chrono::steady_clock;

// How long rank 0 may take to make the unique id before the others give up.
constexpr int kUniqueIdWaitMs = 30000;

// A test's settings come from ctest as one variable, FAIRWAY_TEST_ENV
// ("NAME=value NAME=value"): gtest_discover_tests writes a list
// property's items as separate arguments, so of an ENVIRONMENT list only
// the first variable ever reached the tests. Applied once, before main
// (and so before any rank is forked or any test reads them), where the
// variable is not set already.
[[maybe_unused]] const bool kTestEnvironmentApplied = [] {
  const char* text = std::getenv("FAIRWAY_TEST_ENV");
  if (text == nullptr) return false;
  std::string all = text;
  size_t at = 0;
  while (at < all.size()) {
    size_t end = all.find(' ', at);
    if (end == std::string::npos) end = all.size();
    const std::string item = all.substr(at, end - at);
    const size_t equals = item.find('=');
    if (equals != std::string::npos && equals > 0) {
      setenv(item.substr(0, equals).c_str(), item.substr(equals + 1).c_str(), 0);
    }
    at = end + 1;
  }
  return true;
}();

int stallSecondsFrom(const RankOptions& options) {
  if (options.stallSeconds > 0) return options.stallSeconds;
  if (const char* text = std::getenv("FAIRWAY_TEST_STALL_S")) {
    int seconds = std::atoi(text);
    if (seconds > 0) return seconds;
  }
  return 240;
}

int threadCount() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int count = 0;
  while (dirent* entry = readdir(dir)) count += entry->d_name[0] != '.';
  closedir(dir);
  return count;
}

// A fork from a process with other threads copies locks those threads may
// hold (the allocator's, a logger's) into a child that can never release
// them. ctest runs every test in a fresh process, so the parent has one
// thread; a binary run whole may still have threads an earlier in-process
// test left ending, so wait briefly for them, then say so.
void expectSingleThreadedParent() {
  auto deadline = Clock::now() + std::chrono::seconds(2);
  while (threadCount() > 1 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  int threads = threadCount();
  if (threads > 1) {
    std::fprintf(stderr,
                 "rank harness: forking ranks from a parent with %d threads; a child may inherit a held lock "
                 "(run one test per process, as ctest does)\n",
                 threads);
  }
}

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

bool writeAll(int fd, const void* data, size_t bytes) {
  auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

// Reads the id rank 0 sends, waiting at most kUniqueIdWaitMs.
bool readUniqueId(int fd, fwUniqueId* id) {
  auto* p = reinterpret_cast<char*>(id);
  size_t left = sizeof(*id);
  auto deadline = Clock::now() + std::chrono::milliseconds(kUniqueIdWaitMs);
  while (left > 0) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd pfd{fd, POLLIN, 0};
    if (ms <= 0 || poll(&pfd, 1, static_cast<int>(ms)) <= 0) return false;
    ssize_t n = read(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // rank 0 could not make one
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

// The child's whole life: get the id (rank 0 makes it), run the body, exit.
[[noreturn]] void runRank(int rank, int nranks, const RankOptions& options, std::vector<int>& idPipes,
                          const std::function<int(const RankContext&)>& body) {
  RankContext ctx{rank, nranks, {}};
  // Test bodies allocate and free buffers of up to 64 MiB for every case.
  // By default glibc hands each back to the kernel (munmap, or trimming
  // the heap) and the next faults its pages in again: a third of a
  // collective sweep's time. Here every allocation comes from the heap
  // and a freed heap is kept, so pages fault once per rank. Only speed
  // depends on it: a refused setting leaves glibc's defaults.
  (void)mallopt(M_MMAP_MAX, 0);
  (void)mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Keep only this rank's end of the pipes: a reader then sees end of file
  // if rank 0 dies before sending the id.
  for (int r = 1; r < nranks; ++r) {
    int keep = rank == 0 ? idPipes[2 * r + 1] : (r == rank ? idPipes[2 * r] : -1);
    for (int end = 0; end < 2; ++end) {
      int& fd = idPipes[2 * r + end];
      if (fd >= 0 && fd != keep) { close(fd); fd = -1; }
    }
  }
  if (options.uniqueId) {
    if (rank == 0) {
      bool made = fwGetUniqueId(&ctx.id) == fwSuccess;
      if (!made) std::fprintf(stderr, "[rank 0] fwGetUniqueId: %s\n", fwGetLastErrorMessage());
      // A rank that already exited must not take rank 0 down with SIGPIPE.
      struct sigaction ignore {}, previous {};
      ignore.sa_handler = SIG_IGN;
      sigaction(SIGPIPE, &ignore, &previous);
      for (int r = 1; r < nranks; ++r) {
        if (made) (void)writeAll(idPipes[2 * r + 1], &ctx.id, sizeof(ctx.id));
        close(idPipes[2 * r + 1]);
      }
      sigaction(SIGPIPE, &previous, nullptr);
      if (!made) _exit(1);
    } else {
      bool got = readUniqueId(idPipes[2 * rank], &ctx.id);
      close(idPipes[2 * rank]);
      if (!got) {
        std::fprintf(stderr, "[rank %d] no unique id from rank 0 within %d ms\n", rank, kUniqueIdWaitMs);
        _exit(1);
      }
    }
  }
  int failures = body(ctx);
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(failures > 100 ? 100 : failures);
}

std::vector<int> forkedPids;  // what forkedRankPids() returns

// Whether every rank still running (pid > 0) is one the body stops for good.
bool onlyStoppedRanksLeft(const std::vector<pid_t>& pids, const std::vector<int>& stopForGood) {
  if (stopForGood.empty()) return false;
  for (size_t r = 0; r < pids.size(); ++r) {
    if (pids[r] > 0 && std::find(stopForGood.begin(), stopForGood.end(), static_cast<int>(r)) == stopForGood.end()) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::vector<RankOutcome> runRanks(int nranks, const std::function<int(const RankContext&)>& body,
                                  RankOptions options) {
  const int stallSeconds = stallSecondsFrom(options);
  std::vector<RankOutcome> outcomes(nranks);
  expectSingleThreadedParent();
  // Pipe r carries the unique id from rank 0 to rank r (r >= 1).
  std::vector<int> idPipes(2 * nranks, -1);
  for (int r = 1; options.uniqueId && r < nranks; ++r) {
    if (pipe(&idPipes[2 * r]) != 0) {
      std::perror("rank harness: pipe");
      for (auto& o : outcomes) o.exitCode = 1;
      return outcomes;
    }
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids(nranks, -1);
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) runRank(r, nranks, options, idPipes, body);
    if (pid < 0) {
      std::perror("rank harness: fork");
      outcomes[r].exitCode = 1;
    }
    pids[r] = pid;
    if (pid > 0) forkedPids.push_back(static_cast<int>(pid));
  }
  for (int fd : idPipes) if (fd >= 0) close(fd);

  auto deadline = Clock::now() + std::chrono::seconds(stallSeconds);
  int running = 0;
  for (pid_t pid : pids) running += pid > 0;
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
    if (running > 0 && onlyStoppedRanksLeft(pids, options.stopForGood)) {
      for (int r : options.stopForGood) {
        if (r < 0 || r >= nranks || pids[r] <= 0) continue;
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        outcomes[r].exitCode = 128 + SIGKILL;
        pids[r] = -1;
        --running;
      }
    }
    if (running > 0 && Clock::now() > deadline) {
      for (int r = 0; r < nranks; ++r) {
        if (pids[r] <= 0) continue;
        std::fprintf(stderr, "rank %d still running after %d s: killing it; it was here:\n", r, stallSeconds);
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

const std::vector<int>& forkedRankPids() { return forkedPids; }

void reportFailure(const RankContext& ctx, const std::string& what) {
  std::fprintf(stderr, "[rank %d/%d] %s\n", ctx.rank, ctx.nranks, what.c_str());
}

GuardedBuffer::GuardedBuffer(size_t bytes, bool device, unsigned char fill)
    : storage_(nullptr), mirror_(nullptr), bytes_(bytes), device_(device) {
  const size_t total = bytes + 2 * kGuard;
  mirror_ = static_cast<unsigned char*>(std::malloc(total));
  if (mirror_ == nullptr) return;
  std::memset(mirror_ + kGuard, fill, bytes);
  std::memset(mirror_, 0xA5, kGuard);
  std::memset(mirror_ + kGuard + bytes, 0xA5, kGuard);
  if (!device) {
    storage_ = mirror_;
    return;
  }
  void* memory = nullptr;
  if (fwMemAlloc(&memory, total) != fwSuccess) return;
  storage_ = static_cast<unsigned char*>(memory);
  if (!toDevice()) {
    (void)fwMemFree(storage_);
    storage_ = nullptr;
  }
}

GuardedBuffer::~GuardedBuffer() {
  if (device_ && storage_ != nullptr) (void)fwMemFree(storage_);
  std::free(mirror_);
}

bool GuardedBuffer::toDevice() {
  return !device_ || (storage_ != nullptr && copyToDevice(storage_, mirror_, bytes_ + 2 * kGuard));
}

bool GuardedBuffer::fromDevice() {
  return !device_ || (storage_ != nullptr && copyFromDevice(mirror_, storage_, bytes_ + 2 * kGuard));
}

bool GuardedBuffer::guardsIntact() const {
  if (storage_ == nullptr) return false;
  for (size_t i = 0; i < kGuard; ++i) {
    if (mirror_[i] != 0xA5 || mirror_[kGuard + bytes_ + i] != 0xA5) return false;
  }
  return true;
}

}  // namespace fairway::testing
