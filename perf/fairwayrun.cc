// fairwayrun -np N [options] CMD [ARGS...]
//
// Starts N ranks of CMD on this machine with the environment
// fwCommInitFromEnv reads (FAIRWAY_RANK, FAIRWAY_WORLD_SIZE, FAIRWAY_LOCAL_RANK,
// FAIRWAY_COMM_ID, FAIRWAY_JOB_SECRET), each bound to one CPU (rank r on the
// r-th allowed CPU, wrapping) unless --bind none. If a rank fails, the others
// get a grace period to report their own errors, then are stopped. The exit
// status is the first failing rank's (128 + signal for a signal), else 0.
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/command_line_numbers.h"

namespace {

using fairway::parseInt;
constexpr long kMaxCount = 1000000;  // ranks, nodes or seconds

struct Options {
  int nranks = 0;
  int graceSeconds = 10;
  int timeoutSeconds = 0;  // 0: none
  bool bindToCore = true;
  std::vector<std::string> exports;
  std::vector<std::string> nodeOfRank;  // FAIRWAY_NODE_ID per rank; empty: one real node
  std::vector<char*> command;
};

void usage() {
  std::fprintf(stderr,
               "usage: fairwayrun -np N [-x VAR=VALUE]... [--bind core|none] [--grace SECONDS] [--timeout SECONDS]\n"
               "                  CMD [ARGS...]\n"
               "  -np N          ranks to start on this machine\n"
               "  -x VAR=VALUE   extra environment for every rank\n"
               "  --bind core    rank r runs on the r-th CPU this process may use, wrapping (default)\n"
               "  --bind none    ranks run where the kernel puts them\n"
               "  --grace S      after a rank fails, wait S seconds (default 10) before stopping the rest\n"
               "  --timeout S    stop every rank after S seconds (default: no limit)\n"
               "  --nodes M      pose as M nodes: ranks split into M contiguous blocks, each with its own\n"
               "                 FAIRWAY_NODE_ID (node0, node1, ...)\n"
               "  --node-ids A,B,...  FAIRWAY_NODE_ID of each rank, in rank order (any layout)\n");
}

bool parseOptions(int argc, char** argv, Options* o) {
  int i = 1;
  int emulatedNodes = 0;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) return false;
    const char* value = argv[++i];
    if (flag == "-np" || flag == "-n") {
      if (!parseInt(value, &o->nranks, 1, kMaxCount)) return false;
    } else if (flag == "-x") {
      if (std::strchr(value, '=') == nullptr) return false;
      o->exports.push_back(value);
    } else if (flag == "--bind") {
      if (std::strcmp(value, "core") != 0 && std::strcmp(value, "none") != 0) return false;
      o->bindToCore = std::strcmp(value, "core") == 0;
    } else if (flag == "--grace") {
      if (!parseInt(value, &o->graceSeconds, 0, kMaxCount)) return false;
    } else if (flag == "--timeout") {
      if (!parseInt(value, &o->timeoutSeconds, 1, kMaxCount)) return false;
    } else if (flag == "--nodes") {
      if (!parseInt(value, &emulatedNodes, 1, kMaxCount)) return false;
    } else if (flag == "--node-ids") {
      o->nodeOfRank.clear();
      std::string list = value;
      for (size_t start = 0; start <= list.size();) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size();
        if (comma == start) return false;
        o->nodeOfRank.push_back(list.substr(start, comma - start));
        start = comma + 1;
      }
    } else {
      return false;
    }
  }
  for (; i < argc; ++i) o->command.push_back(argv[i]);
  o->command.push_back(nullptr);
  if (o->nranks <= 0 || o->command.size() <= 1) return false;
  if (emulatedNodes > 0) {
    if (!o->nodeOfRank.empty() || emulatedNodes > o->nranks) return false;
    // Blocks as even as they go: the first nranks % M nodes get one more rank.
    for (int node = 0; node < emulatedNodes; ++node) {
      int ranks = o->nranks / emulatedNodes + (node < o->nranks % emulatedNodes ? 1 : 0);
      for (int k = 0; k < ranks; ++k) o->nodeOfRank.push_back("node" + std::to_string(node));
    }
  }
  if (!o->nodeOfRank.empty() && static_cast<int>(o->nodeOfRank.size()) != o->nranks) {
    std::fprintf(stderr, "fairwayrun: --node-ids names %zu ranks, -np is %d\n", o->nodeOfRank.size(), o->nranks);
    return false;
  }
  return true;
}

// A port the kernel just handed out on loopback; rank 0 listens on it.
int freeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("fairwayrun: finding a free port");
    std::exit(1);
  }
  close(fd);
  return ntohs(addr.sin_port);
}

std::string randomSecret() {
  unsigned char bytes[16];
  if (getrandom(bytes, sizeof(bytes), 0) != sizeof(bytes)) {
    std::perror("fairwayrun: getrandom");
    std::exit(1);
  }
  char hex[33];
  for (int i = 0; i < 16; ++i) std::snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
  return hex;
}

// Pins the calling process to the rank-th CPU of the allowed set, wrapping:
// ranks then stop migrating between cores mid-collective.
void bindToCpu(int rank) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  int count = CPU_COUNT(&allowed);
  if (count == 0) return;
  int target = rank % count;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed) || target-- != 0) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) std::perror("fairwayrun: binding a rank");
    return;
  }
}

volatile sig_atomic_t forwardedSignal = 0;
void onSignal(int sig) { forwardedSignal = sig; }

int statusCode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parseOptions(argc, argv, &o)) {
    usage();
    return 2;
  }
  const std::string commId = "127.0.0.1:" + std::to_string(freeLoopbackPort());
  const std::string secret = randomSecret();
  signal(SIGINT, onSignal);
  signal(SIGTERM, onSignal);

  std::vector<pid_t> pids(o.nranks, -1);
  for (int r = 0; r < o.nranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("fairwayrun: fork");
      return 1;
    }
    if (pid == 0) {
      setenv("FAIRWAY_RANK", std::to_string(r).c_str(), 1);
      setenv("FAIRWAY_WORLD_SIZE", std::to_string(o.nranks).c_str(), 1);
      setenv("FAIRWAY_LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("FAIRWAY_LOCAL_SIZE", std::to_string(o.nranks).c_str(), 1);
      setenv("FAIRWAY_COMM_ID", commId.c_str(), 1);
      setenv("FAIRWAY_JOB_SECRET", secret.c_str(), 1);
      if (!o.nodeOfRank.empty()) setenv("FAIRWAY_NODE_ID", o.nodeOfRank[r].c_str(), 1);
      for (const std::string& e : o.exports) putenv(const_cast<char*>(e.c_str()));
      if (o.bindToCore) bindToCpu(r);
      execvp(o.command[0], o.command.data());
      std::fprintf(stderr, "fairwayrun: cannot run %s: %s\n", o.command[0], std::strerror(errno));
      _exit(127);
    }
    pids[r] = pid;
  }

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  Clock::time_point stopAt = Clock::time_point::max();
  if (o.timeoutSeconds > 0) stopAt = start + std::chrono::seconds(o.timeoutSeconds);
  int running = o.nranks;
  int exitCode = 0;
  bool terminated = false;
  while (running > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      --running;
      int rank = 0;
      while (rank < o.nranks && pids[rank] != pid) ++rank;
      pids[rank] = -1;
      int code = statusCode(status);
      if (code != 0 && exitCode == 0) {
        exitCode = code;
        if (WIFSIGNALED(status)) {
          std::fprintf(stderr, "fairwayrun: rank %d was killed by signal %d\n", rank, WTERMSIG(status));
        } else {
          std::fprintf(stderr, "fairwayrun: rank %d exited with status %d\n", rank, code);
        }
        stopAt = std::min(stopAt, Clock::now() + std::chrono::seconds(o.graceSeconds));
      }
      continue;
    }
    if (forwardedSignal != 0 && exitCode == 0) {
      exitCode = 128 + forwardedSignal;
      stopAt = Clock::now();
    }
    if (Clock::now() >= stopAt) {
      int sig = terminated ? SIGKILL : SIGTERM;
      if (!terminated) {
        std::fprintf(stderr, "fairwayrun: stopping %d remaining rank(s)\n", running);
        if (exitCode == 0) exitCode = 124;
      }
      for (pid_t p : pids) if (p > 0) kill(p, sig);
      terminated = true;
      stopAt = Clock::now() + std::chrono::seconds(2);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return exitCode;
}
