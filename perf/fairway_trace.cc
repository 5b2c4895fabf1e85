// fairway-trace DIR: reads every rank's trace dump in DIR (FAIRWAY_TRACE_DIR)
// and says what went wrong: first one paragraph naming the culprit, then
// each communicator's ranks. Exit status: 0 nothing wrong, 1 a culprit
// found, 2 input that could not be read (and nothing found).
#include <cstdio>
#include <cstring>
#include <string>

#include "trace/trace_analysis.h"

int main(int argc, char** argv) {
  if (argc != 2 || std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr,
                 "usage: fairway-trace DIR\n"
                 "  reads the dumps (pid<PID>.fairway_rank<RANK>) that FAIRWAY_TRACE_DIR=DIR made and names\n"
                 "  the rank and the call a hang or failure started from (docs/debugging.md)\n"
                 "  exit status: 0 nothing wrong, 1 a culprit found, 2 unreadable input\n");
    return 2;
  }
  std::vector<fairway::TraceFile> files;
  fairway::TraceReport report;
  const fairway::Status listed = fairway::readTraceDir(argv[1], &files, &report.unreadable);
  if (!listed.isOk()) {
    std::fprintf(stderr, "fairway-trace: %s\n", listed.message().c_str());
    return 2;
  }
  if (!files.empty()) fairway::analyzeTraces(files, &report);
  for (const std::string& message : report.unreadable) std::fprintf(stderr, "fairway-trace: %s\n", message.c_str());
  if (files.empty()) {
    std::fprintf(stderr, "fairway-trace: no readable dump in %s\n", argv[1]);
    return 2;
  }
  std::printf("%s\n\n%s", report.summary.c_str(), report.details.c_str());
  if (report.culpritFound) return 1;
  return report.unreadable.empty() ? 0 : 2;
}
