// gather_perf: nccl-tests' gather benchmark over Fairway. Size and count are
// the root's whole result (nranks blocks); each rank sends count / nranks.
#include "perf/check_data.h"
#include "perf/perf_common.h"

using namespace fairway;
using namespace fairway::perf;

namespace {

size_t block(size_t count, int nranks) { return count / static_cast<size_t>(nranks); }

const PerfCollective kGather{
    "gather_perf",
    /*usesOp=*/false,
    /*usesRoot=*/true,
    [](size_t count, int nranks) { return block(count, nranks); },
    [](size_t count, int) { return count; },
    [](int n) { return static_cast<double>(n - 1) / n; },
    [](const PerfBuffers& b) -> void* {
      return static_cast<char*>(b.recv) + b.rank * block(b.count, b.nranks) * check::elementSize(b.datatype);
    },
    nullptr,
    [](const PerfBuffers& b) {
      return fwGather(b.send, b.recv, block(b.count, b.nranks), b.datatype, b.root, b.comm, nullptr);
    },
    [](const PerfBuffers& b, int seed) {
      check::fill(b.send, b.datatype, fwSum, b.rank, 0, block(b.count, b.nranks), seed);
    },
    [](const PerfBuffers& b, void* expected, int seed) -> size_t {
      if (b.rank != b.root) return 0;
      const size_t n = block(b.count, b.nranks);
      check::fillGathered(expected, b.datatype, b.nranks, n, seed);
      return n * b.nranks;
    },
};

}  // namespace

int main(int argc, char** argv) { return runPerf(argc, argv, kGather); }
