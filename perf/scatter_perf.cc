// scatter_perf: nccl-tests' scatter benchmark over Fairway. Size and count
// are the root's whole input (nranks blocks); each rank receives block rank.
// In place, the result stays where it lies in the root's input.
#include "perf/check_data.h"
#include "perf/perf_common.h"

using namespace fairway;
using namespace fairway::perf;

namespace {

const PerfCollective kScatter{
    "scatter_perf",
    /*usesOp=*/false,
    /*usesRoot=*/true,
    [](size_t count, int) { return count; },
    // The whole input, so the in-place run fits in recv.
    [](size_t count, int) { return count; },
    shareFromOthers,
    [](const PerfBuffers& b) { return b.recv; },
    ownBlockOfRecv,
    [](const PerfBuffers& b) {
      return fwScatter(b.send, b.recv, blockElements(b.count, b.nranks), b.datatype, b.root, b.comm, nullptr);
    },
    // Every rank fills the root's pattern; only the root's is sent.
    [](const PerfBuffers& b, int seed) {
      check::fill(b.send, b.datatype, fwSum, b.root, 0, blockElements(b.count, b.nranks) * b.nranks, seed);
    },
    [](const PerfBuffers& b, void* expected, int seed) {
      const size_t n = blockElements(b.count, b.nranks);
      check::fill(expected, b.datatype, fwSum, b.root, b.rank * n, n, seed);
      return n;
    },
};

}  // namespace

int main(int argc, char** argv) { return runPerf(argc, argv, kScatter); }
