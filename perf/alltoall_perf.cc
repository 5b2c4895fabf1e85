// alltoall_perf: nccl-tests' all-to-all benchmark over Fairway. Size and
// count are each rank's whole send (and receive) buffer: nranks blocks of
// count / nranks elements, block j going to rank j.
#include "perf/check_data.h"
#include "perf/perf_common.h"

using namespace fairway;
using namespace fairway::perf;

namespace {

const PerfCollective kAllToAll{
    "alltoall_perf",
    /*usesOp=*/false,
    /*usesRoot=*/false,
    [](size_t count, int) { return count; },
    [](size_t count, int) { return count; },
    shareFromOthers,
    [](const PerfBuffers& b) { return b.recv; },
    nullptr,
    [](const PerfBuffers& b) {
      return fwAllToAll(b.send, b.recv, blockElements(b.count, b.nranks), b.datatype, b.comm, nullptr);
    },
    // Rank r's element i (block i / n) is what rank r contributes at global
    // index r * count + i, so every block is distinct.
    [](const PerfBuffers& b, int seed) {
      const size_t n = blockElements(b.count, b.nranks) * b.nranks;
      check::fill(b.send, b.datatype, fwSum, b.rank, b.rank * n, n, seed);
    },
    // Block j of the result is block rank of rank j's input.
    [](const PerfBuffers& b, void* expected, int seed) {
      const size_t each = blockElements(b.count, b.nranks), n = each * b.nranks, es = check::elementSize(b.datatype);
      for (int j = 0; j < b.nranks; ++j) {
        check::fill(static_cast<char*>(expected) + j * each * es, b.datatype, fwSum, j, j * n + b.rank * each, each,
                    seed);
      }
      return n;
    },
};

}  // namespace

int main(int argc, char** argv) { return runPerf(argc, argv, kAllToAll); }
