// scatter_perf: nccl-tests' scatter benchmark over Fairway. Size and count
// are the root's whole input (nranks blocks); each rank receives block rank.
// In place, the result stays where it lies in the root's input.
#include "perf/check_data.h"
#include "perf/perf_common.h"

using namespace fairway;
using namespace fairway::perf;

namespace {

size_t block(size_t count, int nranks) { return count / static_cast<size_t>(nranks); }

void* ownBlock(const PerfBuffers& b) {
  return static_cast<char*>(b.recv) + b.rank * block(b.count, b.nranks) * check::elementSize(b.datatype);
}

const PerfCollective kScatter{
    "scatter_perf",
    /*usesOp=*/false,
    /*usesRoot=*/true,
    [](size_t count, int) { return count; },
    // The whole input, so the in-place run fits in recv.
    [](size_t count, int) { return count; },
    [](int n) { return static_cast<double>(n - 1) / n; },
    [](const PerfBuffers& b) { return b.recv; },
    ownBlock,
    [](const PerfBuffers& b) {
      return fwScatter(b.send, b.recv, block(b.count, b.nranks), b.datatype, b.root, b.comm, nullptr);
    },
    // Every rank fills the root's pattern; only the root's is sent.
    [](const PerfBuffers& b, int seed) {
      check::fill(b.send, b.datatype, fwSum, b.root, 0, block(b.count, b.nranks) * b.nranks, seed);
    },
    [](const PerfBuffers& b, void* expected, int seed) {
      const size_t n = block(b.count, b.nranks);
      check::fill(expected, b.datatype, fwSum, b.root, b.rank * n, n, seed);
      return n;
    },
};

}  // namespace

int main(int argc, char** argv) { return runPerf(argc, argv, kScatter); }
