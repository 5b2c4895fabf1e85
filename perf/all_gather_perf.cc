// all_gather_perf: nccl-tests' allgather benchmark over Fairway. As in
// nccl-tests, size and count are the whole result (nranks blocks); each rank
// sends count / nranks elements.
#include "perf/check_data.h"
#include "perf/perf_common.h"

using namespace fairway;
using namespace fairway::perf;

namespace {

const PerfCollective kAllGather{
    "all_gather_perf",
    /*usesOp=*/false,
    /*usesRoot=*/false,
    blockElements,
    [](size_t count, int) { return count; },
    shareFromOthers,
    ownBlockOfRecv,
    nullptr,
    [](const PerfBuffers& b) {
      const size_t each = blockElements(b.count, b.nranks);
      return b.compression ? fwAllGatherCompressed(b.send, b.recv, each, b.datatype, b.compression, b.comm, nullptr)
                           : fwAllGather(b.send, b.recv, each, b.datatype, b.comm, nullptr);
    },
    [](const PerfBuffers& b, int seed) {
      check::fill(b.send, b.datatype, fwSum, b.rank, 0, blockElements(b.count, b.nranks), seed);
    },
    [](const PerfBuffers& b, void* expected, int seed) {
      const size_t n = blockElements(b.count, b.nranks);
      check::fillGathered(expected, b.datatype, b.nranks, n, seed);
      return n * b.nranks;
    },
    /*compresses=*/true,
};

}  // namespace

int main(int argc, char** argv) { return runPerf(argc, argv, kAllGather); }
