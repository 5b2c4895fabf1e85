// broadcast_perf: nccl-tests' broadcast benchmark over Fairway. Size and
// count are the whole buffer, which every rank ends with; -r picks the root.
#include "perf/check_data.h"
#include "perf/perf_common.h"

using namespace fairway;
using namespace fairway::perf;

namespace {

const PerfCollective kBroadcast{
    "broadcast_perf",
    /*usesOp=*/false,
    /*usesRoot=*/true,
    [](size_t count, int) { return count; },
    [](size_t count, int) { return count; },
    [](int) { return 1.0; },
    [](const PerfBuffers& b) { return b.recv; },
    nullptr,
    [](const PerfBuffers& b) { return fwBroadcast(b.send, b.recv, b.count, b.datatype, b.root, b.comm, nullptr); },
    [](const PerfBuffers& b, int seed) { check::fill(b.send, b.datatype, fwSum, b.rank, 0, b.count, seed); },
    [](const PerfBuffers& b, void* expected, int seed) {
      check::fill(expected, b.datatype, fwSum, b.root, 0, b.count, seed);
      return b.count;
    },
};

}  // namespace

int main(int argc, char** argv) { return runPerf(argc, argv, kBroadcast); }
