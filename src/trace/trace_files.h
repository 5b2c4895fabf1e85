// A job's trace dumps as fairway-trace finds them: every file of a
// directory named *.fairway_rank<N>, read and decoded.
#pragma once

#include <string>
#include <vector>

#include "trace/trace_dump.h"

namespace fairway {

struct TraceFile {
  std::string path;
  TraceDump dump;
};

// Reads every dump in dir; a file that cannot be read becomes a message in
// *unreadable naming it. An error only where dir itself cannot be listed.
Status readTraceDir(const std::string& dir, std::vector<TraceFile>* files, std::vector<std::string>* unreadable);

}  // namespace fairway
