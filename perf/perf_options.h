// The perf binaries' command line: nccl-tests' flags plus -m, -q and -B.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "fairway/fairway.h"
#include "perf/perf_memory.h"

namespace fairway::perf {

struct Options {
  size_t minBytes = 32 << 20;
  size_t maxBytes = 32 << 20;
  double stepFactor = 0;  // 0: grow by stepBytes instead
  size_t stepBytes = 1 << 20;
  int iters = 20;
  int warmup = 5;
  int check = 1;
  int root = 0;
  int average = 1;  // 0 rank 0, 1 mean, 2 min, 3 max
  std::vector<fwDataType_t> types{fwFloat32};
  std::vector<fwRedOp_t> ops{fwSum};
  std::string jsonPath;   // -J: also write the results here as JSON
  Memory memory = Memory::Host;  // -m
  fwCompression_t compression = FW_COMPRESSION_INITIALIZER;  // -q, -B
  bool compressed() const { return compression.kind != fwCompressNone; }
};

void usage(const char* argv0);
// Parses argv into *o; false (having said why on stderr) when an option is
// bad. usesOp: the collective reduces (else -o is ignored).
bool parseOptions(int argc, char** argv, bool usesOp, Options* o);

}  // namespace fairway::perf
