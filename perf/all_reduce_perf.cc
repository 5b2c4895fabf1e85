// all_reduce_perf: nccl-tests' allreduce benchmark over Fairway.
#include "perf/check_data.h"
#include "perf/perf_common.h"

using namespace fairway;
using namespace fairway::perf;

namespace {

const PerfCollective kAllReduce{
    "all_reduce_perf",
    /*usesOp=*/true,
    /*usesRoot=*/false,
    [](size_t count, int) { return count; },
    [](size_t count, int) { return count; },
    [](int n) { return 2.0 * (n - 1) / n; },
    [](const PerfBuffers& b) { return b.recv; },
    nullptr,
    [](const PerfBuffers& b) {
      return b.compression ? fwAllReduceCompressed(b.send, b.recv, b.count, b.datatype, b.op, b.compression, b.comm,
                                                   nullptr)
                           : fwAllReduce(b.send, b.recv, b.count, b.datatype, b.op, b.comm, nullptr);
    },
    [](const PerfBuffers& b, int seed) { check::fill(b.send, b.datatype, b.op, b.rank, 0, b.count, seed); },
    [](const PerfBuffers& b, void* expected, int seed) {
      check::fillReduced(expected, b.datatype, b.op, b.nranks, 0, b.count, seed);
      return b.count;
    },
    /*compresses=*/true,
};

}  // namespace

int main(int argc, char** argv) { return runPerf(argc, argv, kAllReduce); }
