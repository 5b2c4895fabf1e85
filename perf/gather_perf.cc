// gather_perf: nccl-tests' gather benchmark over Fairway. Size and count are
// the root's whole result (nranks blocks); each rank sends count / nranks.
#include "perf/check_data.h"
#include "perf/perf_common.h"

using namespace fairway;
using namespace fairway::perf;

namespace {

const PerfCollective kGather{
    "gather_perf",
    /*usesOp=*/false,
    /*usesRoot=*/true,
    blockElements,
    [](size_t count, int) { return count; },
    shareFromOthers,
    ownBlockOfRecv,
    nullptr,
    [](const PerfBuffers& b) {
      return fwGather(b.send, b.recv, blockElements(b.count, b.nranks), b.datatype, b.root, b.comm, nullptr);
    },
    [](const PerfBuffers& b, int seed) {
      check::fill(b.send, b.datatype, fwSum, b.rank, 0, blockElements(b.count, b.nranks), seed);
    },
    [](const PerfBuffers& b, void* expected, int seed) -> size_t {
      if (b.rank != b.root) return 0;
      const size_t n = blockElements(b.count, b.nranks);
      check::fillGathered(expected, b.datatype, b.nranks, n, seed);
      return n * b.nranks;
    },
};

}  // namespace

int main(int argc, char** argv) { return runPerf(argc, argv, kGather); }
