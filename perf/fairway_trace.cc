// fairway-trace DIR: reads every rank's trace dump in DIR (FAIRWAY_TRACE_DIR)
// and says what went wrong: first one paragraph naming the culprit, then
// each communicator's ranks. Exit status: 0 nothing wrong, 1 a culprit
// found, 2 input that could not be read (and nothing found).
//
// fairway-trace --status PID [DIR]: what a running process's communicators
// are doing, without stopping it: it sends the process its
// FAIRWAY_TRACE_SIGNAL, waits for the dump that makes (in DIR, else the
// process's FAIRWAY_TRACE_DIR) and prints each communicator's last
// completed collective, the calls in flight and the rank a wait waits on.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "trace/trace_analysis.h"
#include "trace/trace_status.h"

namespace {

constexpr int kStatusWaitMs = 10000;

int usage() {
  std::fprintf(stderr,
               "usage: fairway-trace DIR\n"
               "  reads the dumps (pid<PID>.fairway_rank<RANK>) that FAIRWAY_TRACE_DIR=DIR made and names\n"
               "  the rank and the call a hang or failure started from (docs/debugging.md)\n"
               "  exit status: 0 nothing wrong, 1 a culprit found, 2 unreadable input\n"
               "usage: fairway-trace --status PID [DIR]\n"
               "  what a running process's communicators are doing: sends it its FAIRWAY_TRACE_SIGNAL and\n"
               "  reads the dump it writes (into DIR, else its FAIRWAY_TRACE_DIR)\n");
  return 2;
}

// The process's environment as it started (/proc/PID/environ).
std::map<std::string, std::string> environmentOf(int pid, std::string* error) {
  std::map<std::string, std::string> vars;
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  if (!in) {
    *error = "cannot read /proc/" + std::to_string(pid) + "/environ: " + std::strerror(errno) +
             " (no such process, or another user's)";
    return vars;
  }
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) vars[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return vars;
}

// The inode of the process's dump in dir (0: none yet), whatever its
// rank; a new dump is a new inode (it is written apart and renamed).
ino_t dumpInode(const std::string& dir, int pid, std::string* path) {
  const std::string prefix = "pid" + std::to_string(pid) + ".fairway_rank";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  ino_t inode = 0;
  while (dirent* entry = readdir(d)) {
    if (std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    *path = dir + "/" + entry->d_name;
    struct stat st {};
    if (stat(path->c_str(), &st) == 0) inode = st.st_ino;
  }
  closedir(d);
  return inode;
}

int status(int pid, std::string dir) {
  std::string error;
  const auto vars = environmentOf(pid, &error);
  if (!error.empty()) {
    std::fprintf(stderr, "fairway-trace: %s\n", error.c_str());
    return 2;
  }
  if (dir.empty()) {
    auto it = vars.find("FAIRWAY_TRACE_DIR");
    if (it == vars.end() || it->second.empty()) {
      std::fprintf(stderr,
                   "fairway-trace: process %d was started without FAIRWAY_TRACE_DIR, so it does not answer the "
                   "trace signal; give the directory it was set to as the second argument\n",
                   pid);
      return 2;
    }
    dir = it->second;
  }
  auto sig = vars.find("FAIRWAY_TRACE_SIGNAL");
  const std::string name = sig == vars.end() || sig->second.empty() ? "USR1" : sig->second;
  if (name != "USR1" && name != "USR2") {
    std::fprintf(stderr, "fairway-trace: process %d has FAIRWAY_TRACE_SIGNAL=%s: it answers no signal\n", pid,
                 name.c_str());
    return 2;
  }
  std::string path;
  const ino_t before = dumpInode(dir, pid, &path);
  if (kill(pid, name == "USR2" ? SIGUSR2 : SIGUSR1) != 0) {
    std::fprintf(stderr, "fairway-trace: cannot signal process %d: %s\n", pid, std::strerror(errno));
    return 2;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kStatusWaitMs);
  ino_t now = before;
  while ((now = dumpInode(dir, pid, &path)) == before || now == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "fairway-trace: process %d wrote no dump into %s within %d s of SIG%s\n", pid,
                   dir.c_str(), kStatusWaitMs / 1000, name.c_str());
      return 2;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fairway::TraceDump dump;
  const fairway::Status decoded = fairway::decodeTraceDump(bytes, &dump);
  if (!decoded.isOk()) {
    std::fprintf(stderr, "fairway-trace: %s: %s\n", path.c_str(), decoded.message().c_str());
    return 2;
  }
  timespec clock{};
  clock_gettime(CLOCK_REALTIME, &clock);
  const uint64_t nowNs = static_cast<uint64_t>(clock.tv_sec) * 1000000000u + static_cast<uint64_t>(clock.tv_nsec);
  std::printf("%s", fairway::describeStatus(dump, nowNs).c_str());
  return 0;
}

int analyze(const char* dir) {
  std::vector<fairway::TraceFile> files;
  fairway::TraceReport report;
  const fairway::Status listed = fairway::readTraceDir(dir, &files, &report.unreadable);
  if (!listed.isOk()) {
    std::fprintf(stderr, "fairway-trace: %s\n", listed.message().c_str());
    return 2;
  }
  if (!files.empty()) fairway::analyzeTraces(files, &report);
  for (const std::string& message : report.unreadable) std::fprintf(stderr, "fairway-trace: %s\n", message.c_str());
  if (files.empty()) {
    std::fprintf(stderr, "fairway-trace: no readable dump in %s\n", dir);
    return 2;
  }
  std::printf("%s\n\n%s", report.summary.c_str(), report.details.c_str());
  if (report.culpritFound) return 1;
  return report.unreadable.empty() ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && argc <= 4 && std::strcmp(argv[1], "--status") == 0) {
    char* end = nullptr;
    const long pid = std::strtol(argv[2], &end, 10);
    if (end == argv[2] || *end != '\0' || pid <= 0) {
      std::fprintf(stderr, "fairway-trace: --status takes a process id, not \"%s\"\n", argv[2]);
      return 2;
    }
    return status(static_cast<int>(pid), argc == 4 ? argv[3] : "");
  }
  if (argc != 2 || argv[1][0] == '-') return usage();
  return analyze(argv[1]);
}
