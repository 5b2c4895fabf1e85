#include "tests/multirank/collective_cases.h"

#include <string>

#include "perf/check_data.h"

namespace fairway::testing {
namespace {

using check::fill;
using check::fillReduced;

size_t one(size_t count, int, int, int) { return count; }
size_t all(size_t count, int n, int, int) { return count * n; }
size_t onRoot(size_t count, int, int rank, int root) { return rank == root ? count : 0; }
size_t allOnRoot(size_t count, int n, int rank, int root) { return rank == root ? count * n : 0; }

void sameBuffer(size_t, int, int, size_t* s, size_t* r) { *s = 0; *r = 0; }

// Data movement uses the sum pattern of check_data for its values.
void fillOwnBlock(void* send, const CallArgs& a, int seed) { fill(send, a.datatype, fwSum, a.rank, 0, a.count, seed); }
void fillBlocksPerPeer(void* send, const CallArgs& a, int seed) {
  fill(send, a.datatype, fwSum, a.rank, 0, a.count * a.nranks, seed);
}
size_t expectEveryRanksBlock(void* expected, const CallArgs& a, int seed) {
  size_t es = check::elementSize(a.datatype);
  for (int i = 0; i < a.nranks; ++i) fill(static_cast<char*>(expected) + i * a.count * es, a.datatype, fwSum, i, 0, a.count, seed);
  return a.count * a.nranks;
}

std::vector<CollectiveCase> withForcedAlgorithms(std::vector<CollectiveCase> cases) {
  static const struct { const char* name; const char* algorithm; } kForced[] = {
      {"allreduce_ring", "allreduce:ring"},
      {"allreduce_rabenseifner", "allreduce:rabenseifner"},
      {"allreduce_recursive_doubling", "allreduce:recursive_doubling"},
      {"allgather_ring", "allgather:ring"},
      {"allgather_bruck", "allgather:bruck"},
      // One node's defaults run on its shared-memory segment; these keep
      // the point-to-point algorithms it replaced in the sweep.
      {"reducescatter_ring", "reducescatter:ring"},
      {"broadcast_binomial", "broadcast:binomial"},
      {"reduce_binomial", "reduce:binomial"},
  };
  std::vector<CollectiveCase> extra;
  for (const auto& forced : kForced) {
    for (const CollectiveCase& c : cases) {
      if (std::string(forced.algorithm).rfind(std::string(c.name) + ":", 0) == 0) {
        CollectiveCase copy = c;
        copy.name = forced.name;
        copy.algorithm = forced.algorithm;
        extra.push_back(copy);
      }
    }
  }
  cases.insert(cases.end(), extra.begin(), extra.end());
  return cases;
}

const std::vector<CollectiveCase> kCases = withForcedAlgorithms({
    {"allreduce", nullptr, true, false, true, one, one, sameBuffer,
     [](const CallArgs& a, fwRequest_t* rq) {
       return rq ? fwIallReduce(a.send, a.recv, a.count, a.datatype, a.op, a.comm, rq)
                 : fwAllReduce(a.send, a.recv, a.count, a.datatype, a.op, a.comm, a.stream);
     },
     [](void* send, const CallArgs& a, int seed) { fill(send, a.datatype, a.op, a.rank, 0, a.count, seed); },
     [](void* e, const CallArgs& a, int seed) {
       fillReduced(e, a.datatype, a.op, a.nranks, 0, a.count, seed);
       return a.count;
     }},
    {"reducescatter", nullptr, true, false, true, all, one,
     [](size_t count, int rank, int, size_t* s, size_t* r) { *s = 0; *r = count * rank; },
     [](const CallArgs& a, fwRequest_t* rq) {
       return rq ? fwIreduceScatter(a.send, a.recv, a.count, a.datatype, a.op, a.comm, rq)
                 : fwReduceScatter(a.send, a.recv, a.count, a.datatype, a.op, a.comm, a.stream);
     },
     [](void* send, const CallArgs& a, int seed) { fill(send, a.datatype, a.op, a.rank, 0, a.count * a.nranks, seed); },
     [](void* e, const CallArgs& a, int seed) {
       fillReduced(e, a.datatype, a.op, a.nranks, a.count * a.rank, a.count, seed);
       return a.count;
     }},
    {"allgather", nullptr, false, false, true, one, all,
     [](size_t count, int rank, int, size_t* s, size_t* r) { *s = count * rank; *r = 0; },
     [](const CallArgs& a, fwRequest_t* rq) {
       return rq ? fwIallGather(a.send, a.recv, a.count, a.datatype, a.comm, rq)
                 : fwAllGather(a.send, a.recv, a.count, a.datatype, a.comm, a.stream);
     },
     fillOwnBlock, expectEveryRanksBlock},
    {"broadcast", nullptr, false, true, true, onRoot, one, sameBuffer,
     [](const CallArgs& a, fwRequest_t* rq) {
       return rq ? fwIbroadcast(a.send, a.recv, a.count, a.datatype, a.root, a.comm, rq)
                 : fwBroadcast(a.send, a.recv, a.count, a.datatype, a.root, a.comm, a.stream);
     },
     fillOwnBlock,
     [](void* e, const CallArgs& a, int seed) {
       fill(e, a.datatype, fwSum, a.root, 0, a.count, seed);
       return a.count;
     }},
    {"reduce", nullptr, true, true, true, one, onRoot, sameBuffer,
     [](const CallArgs& a, fwRequest_t* rq) {
       return rq ? fwIreduce(a.send, a.recv, a.count, a.datatype, a.op, a.root, a.comm, rq)
                 : fwReduce(a.send, a.recv, a.count, a.datatype, a.op, a.root, a.comm, a.stream);
     },
     [](void* send, const CallArgs& a, int seed) { fill(send, a.datatype, a.op, a.rank, 0, a.count, seed); },
     [](void* e, const CallArgs& a, int seed) -> size_t {
       if (a.rank != a.root) return 0;
       fillReduced(e, a.datatype, a.op, a.nranks, 0, a.count, seed);
       return a.count;
     }},
    {"alltoall", nullptr, false, false, true, all, all, sameBuffer,
     [](const CallArgs& a, fwRequest_t* rq) {
       return rq ? fwIallToAll(a.send, a.recv, a.count, a.datatype, a.comm, rq)
                 : fwAllToAll(a.send, a.recv, a.count, a.datatype, a.comm, a.stream);
     },
     fillBlocksPerPeer,
     [](void* e, const CallArgs& a, int seed) {
       size_t es = check::elementSize(a.datatype);
       for (int i = 0; i < a.nranks; ++i) {
         fill(static_cast<char*>(e) + i * a.count * es, a.datatype, fwSum, i, a.count * a.rank, a.count, seed);
       }
       return a.count * a.nranks;
     }},
    {"gather", nullptr, false, true, true, one, allOnRoot,
     [](size_t count, int, int root, size_t* s, size_t* r) { *s = count * root; *r = 0; },
     [](const CallArgs& a, fwRequest_t* rq) {
       return rq ? fwIgather(a.send, a.recv, a.count, a.datatype, a.root, a.comm, rq)
                 : fwGather(a.send, a.recv, a.count, a.datatype, a.root, a.comm, a.stream);
     },
     fillOwnBlock,
     [](void* e, const CallArgs& a, int seed) -> size_t {
       return a.rank == a.root ? expectEveryRanksBlock(e, a, seed) : 0;
     }},
    {"scatter", nullptr, false, true, true, allOnRoot, one,
     [](size_t count, int, int root, size_t* s, size_t* r) { *s = 0; *r = count * root; },
     [](const CallArgs& a, fwRequest_t* rq) {
       return rq ? fwIscatter(a.send, a.recv, a.count, a.datatype, a.root, a.comm, rq)
                 : fwScatter(a.send, a.recv, a.count, a.datatype, a.root, a.comm, a.stream);
     },
     fillBlocksPerPeer,
     [](void* e, const CallArgs& a, int seed) {
       fill(e, a.datatype, fwSum, a.root, a.count * a.rank, a.count, seed);
       return a.count;
     }},
});

}  // namespace

const std::vector<CollectiveCase>& collectiveCases() { return kCases; }

}  // namespace fairway::testing
