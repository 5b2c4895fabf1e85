#include "trace/trace_registry.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "core/log.h"

namespace fairway {

namespace {

// Never destroyed: a dump may run while the process exits.
struct Registry {
  std::mutex mutex;  // the sources, and one dump at a time
  std::vector<TraceSource*> sources;  // in registration order: the first names the file's rank
  bool signalArmed = false;
  int signalPipe[2] = {-1, -1};
  std::string signalDir;
};

Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

std::string thisHost() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

void onTraceSignal(int) {
  const int saved = errno;
  const char byte = 1;
  (void)!::write(registry().signalPipe[1], &byte, 1);  // async-signal-safe; a full pipe has a dump pending
  errno = saved;
}

void signalDumpLoop() {
  Registry& r = registry();
  for (;;) {
    char byte = 0;
    const ssize_t n = ::read(r.signalPipe[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    std::string path;
    const Status st = dumpTraces(r.signalDir, "signal", &path);
    if (st.isOk()) {
      FW_LOG(Info, Init, "trace dump on signal: %s", path.c_str());
    } else {
      FW_LOG(Warn, Init, "trace dump on signal failed: %s", st.message().c_str());
    }
  }
}

}  // namespace

void registerTraceSource(TraceSource* source) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.sources.push_back(source);
}

void unregisterTraceSource(TraceSource* source) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (size_t i = 0; i < r.sources.size(); ++i) {
    if (r.sources[i] == source) {
      r.sources.erase(r.sources.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
  }
}

Status dumpTraces(const std::string& dir, const std::string& reason, std::string* path) {
  if (dir.empty()) return Status(fwInvalidUsage, "no directory for the trace dump (set FAIRWAY_TRACE_DIR)");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  TraceDump dump;
  dump.pid = static_cast<int>(getpid());
  dump.host = thisHost();
  dump.reason = reason;
  dump.timeNs = traceClockNs();
  dump.library = "fairway " + std::to_string(FAIRWAY_MAJOR) + "." + std::to_string(FAIRWAY_MINOR) + "." +
                 std::to_string(FAIRWAY_PATCH);
  dump.rank = r.sources.empty() ? 0 : r.sources.front()->traceGlobalRank();
  for (TraceSource* source : r.sources) dump.communicators.push_back(source->traceSnapshot());
  return writeTraceDump(dir, dump, path);
}

Status armTraceSignal(int signo, const std::string& dir) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.signalArmed) return Status::ok();
  // A handler the program installed is its own: never replaced.
  struct sigaction current {};
  if (sigaction(signo, nullptr, &current) == 0 &&
      ((current.sa_flags & SA_SIGINFO) != 0 || (current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN))) {
    return Status(fwInvalidUsage, std::string("SIG") + (signo == SIGUSR2 ? "USR2" : "USR1") +
                                      " already has a handler of the program's: no trace dumps on it (set "
                                      "FAIRWAY_TRACE_SIGNAL to the other one, or to none)");
  }
  if (::pipe2(r.signalPipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Status(fwSystemError, std::string("trace signal: pipe: ") + std::strerror(errno));
  }
  // The reader blocks; only the handler's end must never block.
  const int flags = fcntl(r.signalPipe[0], F_GETFL);
  (void)fcntl(r.signalPipe[0], F_SETFL, flags & ~O_NONBLOCK);
  struct sigaction action {};
  action.sa_handler = onTraceSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  if (sigaction(signo, &action, nullptr) != 0) {
    const std::string why = std::strerror(errno);
    ::close(r.signalPipe[0]);
    ::close(r.signalPipe[1]);
    return Status(fwSystemError, "trace signal " + std::to_string(signo) + ": " + why);
  }
  r.signalDir = dir;
  r.signalArmed = true;
  std::thread(signalDumpLoop).detach();
  return Status::ok();
}

}  // namespace fairway
