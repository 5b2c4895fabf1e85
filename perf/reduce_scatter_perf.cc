// reduce_scatter_perf: nccl-tests' reduce-scatter benchmark over Fairway.
// As in nccl-tests, size and count are the whole input (nranks blocks);
// each rank receives count / nranks elements.
#include "perf/check_data.h"
#include "perf/perf_common.h"

using namespace fairway;
using namespace fairway::perf;

namespace {

size_t block(size_t count, int nranks) { return count / static_cast<size_t>(nranks); }

const PerfCollective kReduceScatter{
    "reduce_scatter_perf",
    /*usesOp=*/true,
    /*usesRoot=*/false,
    [](size_t count, int) { return count; },
    // The whole input, so the in-place run fits in recv.
    [](size_t count, int) { return count; },
    [](int n) { return static_cast<double>(n - 1) / n; },
    [](const PerfBuffers& b) { return b.recv; },
    [](const PerfBuffers& b) -> void* {
      return static_cast<char*>(b.recv) + b.rank * block(b.count, b.nranks) * check::elementSize(b.datatype);
    },
    [](const PerfBuffers& b) {
      return fwReduceScatter(b.send, b.recv, block(b.count, b.nranks), b.datatype, b.op, b.comm, nullptr);
    },
    [](const PerfBuffers& b, int seed) {
      check::fill(b.send, b.datatype, b.op, b.rank, 0, block(b.count, b.nranks) * b.nranks, seed);
    },
    [](const PerfBuffers& b, void* expected, int seed) {
      const size_t n = block(b.count, b.nranks);
      check::fillReduced(expected, b.datatype, b.op, b.nranks, b.rank * n, n, seed);
      return n;
    },
};

}  // namespace

int main(int argc, char** argv) { return runPerf(argc, argv, kReduceScatter); }
