// reduce_scatter_perf: nccl-tests' reduce-scatter benchmark over Fairway.
// As in nccl-tests, size and count are the whole input (nranks blocks);
// each rank receives count / nranks elements.
#include "perf/check_data.h"
#include "perf/perf_common.h"

using namespace fairway;
using namespace fairway::perf;

namespace {

const PerfCollective kReduceScatter{
    "reduce_scatter_perf",
    /*usesOp=*/true,
    /*usesRoot=*/false,
    [](size_t count, int) { return count; },
    // The whole input, so the in-place run fits in recv.
    [](size_t count, int) { return count; },
    shareFromOthers,
    [](const PerfBuffers& b) { return b.recv; },
    ownBlockOfRecv,
    [](const PerfBuffers& b) {
      const size_t each = blockElements(b.count, b.nranks);
      return b.compression ? fwReduceScatterCompressed(b.send, b.recv, each, b.datatype, b.op, b.compression, b.comm,
                                                       nullptr)
                           : fwReduceScatter(b.send, b.recv, each, b.datatype, b.op, b.comm, nullptr);
    },
    [](const PerfBuffers& b, int seed) {
      check::fill(b.send, b.datatype, b.op, b.rank, 0, blockElements(b.count, b.nranks) * b.nranks, seed);
    },
    [](const PerfBuffers& b, void* expected, int seed) {
      const size_t n = blockElements(b.count, b.nranks);
      check::fillReduced(expected, b.datatype, b.op, b.nranks, b.rank * n, n, seed);
      return n;
    },
    /*compresses=*/true,
};

}  // namespace

int main(int argc, char** argv) { return runPerf(argc, argv, kReduceScatter); }
