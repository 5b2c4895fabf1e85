// libFuzzer target: the FAIRWAY_* variables as the config parser reads
// them. The input is lines of NAME=VALUE; a parse that succeeds must leave
// every value inside the range its variable documents.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "core/config.h"

using namespace fairway;

namespace {
bool finitePositive(double v) { return std::isfinite(v) && v > 0; }
bool finiteNonNegative(double v) { return std::isfinite(v) && v >= 0; }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::map<std::string, std::string> variables;
  std::string text(reinterpret_cast<const char*>(data), size);
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    size_t eq = line.find('=');
    if (eq != std::string::npos) variables[line.substr(0, eq)] = line.substr(eq + 1);
    start = end + 1;
  }
  auto lookup = [&](const char* name) -> const char* {
    auto it = variables.find(name);
    // getenv stops at the first NUL, and so does this.
    return it == variables.end() ? nullptr : it->second.c_str();
  };
  Config c;
  if (!Config::fromVariables(lookup, &c).isOk()) return 0;
  const PipelineSettings& p = c.pipeline;
  bool inRange = c.timeoutMs >= 1 && p.segmentBytes >= 4096 && p.segmentBytes <= (size_t{1} << 30) &&
                 p.depth >= 1 && p.depth <= 64 && c.spinMicros >= 0 && p.sliceBytes >= 4096 &&
                 p.slicesInFlight >= 1 && p.slicesInFlight <= 16 && p.minShardBytes >= 1 &&
                 p.stagingSliceBytes >= 4096 && p.stagingSliceBytes <= (size_t{1} << 30) &&
                 (c.transport == "auto" || c.transport == "ucx" || c.transport == "nccl") &&
                 finitePositive(c.intraLink.gbPerSec) && finitePositive(c.interLink.gbPerSec) &&
                 finiteNonNegative(c.intraLink.alphaUs) && finiteNonNegative(c.interLink.alphaUs);
  if (!inRange) __builtin_trap();
  return 0;
}
