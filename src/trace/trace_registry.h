// The process's live communicators' flight records, and the ways a dump of
// all of them is made: a call (fwCommDumpTrace), a failure (the
// communicator calls dumpTraces), and a signal (FAIRWAY_TRACE_SIGNAL). A
// signal's handler only writes a byte to a pipe; a thread of the library
// reads it and writes the dump, so nothing unsafe runs inside the handler.
#pragma once

#include <string>

#include "core/status.h"
#include "trace/trace_dump.h"

namespace fairway {

// What a communicator gives a dump.
class TraceSource {
 public:
  virtual ~TraceSource() = default;
  virtual CommunicatorTrace traceSnapshot() = 0;
  // Its rank among the ranks of the process's first communicator (the file's rank).
  virtual int traceGlobalRank() const = 0;
};

// A source is snapshotted by every dump from register until unregister
// (which waits for a dump under way).
void registerTraceSource(TraceSource* source);
void unregisterTraceSource(TraceSource* source);

// Writes the process's dump into dir; *path names the file.
Status dumpTraces(const std::string& dir, const std::string& reason, std::string* path);

// From now on, signal signo writes a dump into dir (the first call's
// signal and dir win; later calls change nothing). An error where the
// handler cannot be installed, or where the program has a handler of its
// own for signo (never replaced).
Status armTraceSignal(int signo, const std::string& dir);

}  // namespace fairway
