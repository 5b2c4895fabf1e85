// fairway-trace's reading of a job's dumps: which rank and which call
// made it hang or fail. The ranks' records of one communicator are lined up
// by collective number (every rank numbers its collectives alike), and
// four things are looked for, in this order, at the lowest number where
// any appears:
//   - calls that do not match (operation, count, datatype, op, root);
//   - ranks that never posted the number the others are stuck in, or
//     posted it long after them;
//   - ranks without a dump, which the survivors name as failed;
//   - ranks stuck inside it, with what each one's error says it waits on;
// and the first failure of the job (the earliest ended with an error).
#pragma once

#include <string>
#include <vector>

#include "trace/trace_files.h"

namespace fairway {

struct TraceReport {
  bool culpritFound = false;
  std::string summary;                  // one paragraph: what went wrong
  std::string details;                  // per communicator, per rank
  std::vector<std::string> unreadable;  // one message per file that could not be read, naming it
};

// The analysis of the dumps read.
void analyzeTraces(const std::vector<TraceFile>& files, TraceReport* report);

}  // namespace fairway
