#include "core/log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "core/environment.h"
#include "core/strings.h"

namespace fairway {
namespace {

struct LogSettings {
  LogLevel level = LogLevel::Warn;
  uint32_t subsysMask = static_cast<uint32_t>(LogSubsys::All);
  FILE* out = stderr;
  char host[64] = "?";
};

LogLevel parseLevel(const char* text) {
  if (text == nullptr) return LogLevel::Warn;
  std::string v = toUpper(text);
  if (v == "NONE") return LogLevel::None;
  if (v == "INFO") return LogLevel::Info;
  if (v == "TRACE") return LogLevel::Trace;
  if (v != "WARN") std::fprintf(stderr, "fairway: FAIRWAY_DEBUG=%s is not NONE|WARN|INFO|TRACE; using WARN\n", text);
  return LogLevel::Warn;
}

uint32_t parseSubsystems(const char* text) {
  if (text == nullptr || *text == '\0') return static_cast<uint32_t>(LogSubsys::All);
  static const struct { const char* name; LogSubsys bit; } kNames[] = {
      {"INIT", LogSubsys::Init}, {"BOOTSTRAP", LogSubsys::Bootstrap},
      {"TRANSPORT", LogSubsys::Transport}, {"COLL", LogSubsys::Coll},
      {"ALGO", LogSubsys::Algo}, {"API", LogSubsys::Api}, {"ALL", LogSubsys::All}};
  uint32_t mask = 0;
  for (const std::string& item : splitString(toUpper(text), ',')) {
    bool known = false;
    for (const auto& n : kNames) {
      if (item == n.name) { mask |= static_cast<uint32_t>(n.bit); known = true; }
    }
    if (!known) std::fprintf(stderr, "fairway: FAIRWAY_DEBUG_SUBSYS names unknown subsystem '%s'\n", item.c_str());
  }
  return mask;
}

FILE* openLogFile(const char* pattern, const char* host) {
  if (pattern == nullptr || *pattern == '\0') return stderr;
  std::string path;
  for (const char* p = pattern; *p; ++p) {
    if (p[0] == '%' && p[1] == 'h') { path += host; ++p; }
    else if (p[0] == '%' && p[1] == 'p') { path += std::to_string(getpid()); ++p; }
    else path += *p;
  }
  FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) {
    std::fprintf(stderr, "fairway: cannot open FAIRWAY_DEBUG_FILE %s: %s\n", path.c_str(), std::strerror(errno));
    return stderr;
  }
  setvbuf(f, nullptr, _IOLBF, 0);
  return f;
}

const LogSettings& settings() {
  static const LogSettings s = [] {
    LogSettings v;
    gethostname(v.host, sizeof(v.host) - 1);
    v.level = parseLevel(environmentValue("FAIRWAY_DEBUG"));
    v.subsysMask = parseSubsystems(environmentValue("FAIRWAY_DEBUG_SUBSYS"));
    v.out = openLogFile(environmentValue("FAIRWAY_DEBUG_FILE"), v.host);
    return v;
  }();
  return s;
}

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::Warn: return "WARN";
    case LogLevel::Info: return "INFO";
    case LogLevel::Trace: return "TRACE";
    default: return "";
  }
}

}  // namespace

bool logEnabled(LogLevel level, LogSubsys subsys) {
  const LogSettings& s = settings();
  return static_cast<int>(level) <= static_cast<int>(s.level) &&
         (s.subsysMask & static_cast<uint32_t>(subsys)) != 0;
}

void logLine(LogLevel level, LogSubsys, const char* fmt, ...) {
  const LogSettings& s = settings();
  char body[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(body, sizeof(body), fmt, args);
  va_end(args);
  // One fprintf per line so lines from threads do not interleave.
  std::fprintf(s.out, "%s:%d [FAIRWAY %s] %s\n", s.host, static_cast<int>(getpid()), levelName(level), body);
}

}  // namespace fairway
