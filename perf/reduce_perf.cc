// reduce_perf: nccl-tests' reduce benchmark over Fairway. Size and count
// are the whole buffer; only the root (-r) receives, so only it checks.
#include "perf/check_data.h"
#include "perf/perf_common.h"

using namespace fairway;
using namespace fairway::perf;

namespace {

const PerfCollective kReduce{
    "reduce_perf",
    /*usesOp=*/true,
    /*usesRoot=*/true,
    [](size_t count, int) { return count; },
    [](size_t count, int) { return count; },
    [](int) { return 1.0; },
    [](const PerfBuffers& b) { return b.recv; },
    nullptr,
    [](const PerfBuffers& b) {
      return fwReduce(b.send, b.recv, b.count, b.datatype, b.op, b.root, b.comm, nullptr);
    },
    [](const PerfBuffers& b, int seed) { check::fill(b.send, b.datatype, b.op, b.rank, 0, b.count, seed); },
    [](const PerfBuffers& b, void* expected, int seed) -> size_t {
      if (b.rank != b.root) return 0;
      check::fillReduced(expected, b.datatype, b.op, b.nranks, 0, b.count, seed);
      return b.count;
    },
};

}  // namespace

int main(int argc, char** argv) { return runPerf(argc, argv, kReduce); }
