// Logging controlled by FAIRWAY_DEBUG (WARN|INFO|TRACE, default WARN) and
// FAIRWAY_DEBUG_SUBSYS (comma list of subsystems, default ALL). Lines go to
// stderr, or to FAIRWAY_DEBUG_FILE where "%h" becomes the host and "%p" the pid.
#pragma once

#include <cstdint>

namespace fairway {

enum class LogLevel : int { None = 0, Warn = 1, Info = 2, Trace = 3 };
enum class LogSubsys : uint32_t {
  Init = 1u << 0,
  Bootstrap = 1u << 1,
  Transport = 1u << 2,
  Coll = 1u << 3,
  Algo = 1u << 4,
  Api = 1u << 5,
  All = 0xffffffffu,
};

bool logEnabled(LogLevel level, LogSubsys subsys);
void logLine(LogLevel level, LogSubsys subsys, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

}  // namespace fairway

#define FW_LOG(level, subsys, ...)                                                     \
  do {                                                                                 \
    if (::fairway::logEnabled(::fairway::LogLevel::level, ::fairway::LogSubsys::subsys)) \
      ::fairway::logLine(::fairway::LogLevel::level, ::fairway::LogSubsys::subsys, __VA_ARGS__); \
  } while (0)
// As FW_LOG, with the level chosen at run time.
#define FW_LOG_AT(levelValue, subsys, ...)                                             \
  do {                                                                                 \
    if (::fairway::logEnabled(levelValue, ::fairway::LogSubsys::subsys))               \
      ::fairway::logLine(levelValue, ::fairway::LogSubsys::subsys, __VA_ARGS__);       \
  } while (0)
