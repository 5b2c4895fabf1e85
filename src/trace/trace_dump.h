// A process's trace dump: every live communicator's flight record, written
// in torch's flight-recorder dump format (version 2.10: a pickled
// dictionary with "version", "pg_config", "pg_status" and "entries"), so
// `python -m torch.distributed.flight_recorder.fr_trace` reads a Fairway
// job's dumps as it reads NCCL's. What torch's format has no field for
// (Fairway's own states, the plan, the error, the stream) rides in keys
// torch ignores: "fairway" at the top and "fairway_*" in each entry.
//
// One file per process, named `pid<PID>.fairway_rank<RANK>` (torch's
// analyzer infers the common prefix "fairway_rank" and reads the rank
// from the digits after it), written to a hidden temporary name and
// renamed: a reader sees the whole dump or none.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "trace/flight_record.h"

namespace fairway {

constexpr const char* kTraceFormatVersion = "2.10";  // torch's flight-recorder format
constexpr int kFairwayTraceFormat = 1;               // the "fairway" keys' own version
// The most ranks a communicator of a readable dump may have: fairway-trace
// keeps a record per rank, so a corrupted size must not make it allocate
// gigabytes.
constexpr int kMostTracedRanks = 1 << 20;

// One communicator as a dump holds it.
struct CommunicatorTrace {
  std::string name;              // the same on every member rank
  std::string desc;              // how it was made: "world", "split", "shrink", ...
  std::vector<int> globalRanks;  // its members, as ranks of the process's first communicator
  int rank = 0;
  int size = 0;
  int64_t timeoutMs = 0;
  std::string broken;            // the failure that broke it; empty while healthy
  std::vector<int> failedRanks;  // as ranks of this communicator
  uint64_t posted = 0;           // operations ever posted (the ring keeps the last ones)
  int waitingOn = -1;            // the rank a wait idling at the dump waits on (-1: none)
  uint64_t waitingSinceNs = 0;
  std::vector<TraceEntry> entries;
  std::map<uint64_t, std::string> failures;  // by record id
  // Names of the plan's algorithm and provider ids (set when written; a
  // dump read back carries the names in algorithmNames/providerNames).
  std::map<uint64_t, std::string> algorithmNames, providerNames;  // by record id
};

struct TraceDump {
  int rank = 0;      // in the process's first communicator (the file's rank)
  int pid = 0;
  std::string host;
  std::string reason;  // why it was written: "timeout", "peer failure", "signal", "call", ...
  uint64_t timeNs = 0;
  std::string library;  // "fairway <version>"
  std::vector<CommunicatorTrace> communicators;
};

// The dump's bytes.
std::string encodeTraceDump(const TraceDump& dump);
// Reads bytes back (a Fairway dump; torch's keys alone are not enough).
// Errors name what is missing or malformed.
Status decodeTraceDump(const std::string& bytes, TraceDump* out);

// The file name for rank and pid, and the whole write (temporary, then rename).
std::string traceDumpFileName(int rank, int pid);
Status writeTraceDump(const std::string& dir, const TraceDump& dump, std::string* path);

// A call as a reader would write it, with what every rank must agree on:
// "allreduce (count 256, float, sum)", "recv (count 4, float, from rank 3)".
std::string describeCall(const TraceEntry& e);
// A real time as "HH:MM:SS.mmm UTC" ("?" for 0).
std::string traceTimeText(uint64_t ns);

// torch's name of an operation ("all_reduce") and of a dtype ("Float").
std::string torchOperationName(uint8_t kind);
std::string torchDtypeName(uint8_t datatype);

}  // namespace fairway
