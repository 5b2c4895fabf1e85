// libFuzzer target: a trace dump as fairway-trace reads it from a directory
// anyone may have written to. A dump that decodes must encode and decode
// back to the same communicators and entries, and the analysis of it must
// finish.
#include <cstddef>
#include <cstdint>
#include <string>

#include "trace/trace_analysis.h"
#include "trace/trace_dump.h"

using namespace fairway;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  TraceDump dump;
  if (!decodeTraceDump(bytes, &dump).isOk()) return 0;
  TraceDump again;
  if (!decodeTraceDump(encodeTraceDump(dump), &again).isOk()) __builtin_trap();
  if (again.communicators.size() != dump.communicators.size()) __builtin_trap();
  for (size_t i = 0; i < dump.communicators.size(); ++i) {
    if (again.communicators[i].entries.size() != dump.communicators[i].entries.size()) __builtin_trap();
  }
  if (dump.communicators.empty()) return 0;
  std::vector<TraceFile> files(2);
  files[0].path = "a";
  files[0].dump = dump;
  files[1].path = "b";
  files[1].dump = again;
  TraceReport report;
  analyzeTraces(files, &report);
  return 0;
}
