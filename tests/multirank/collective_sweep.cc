#include "tests/multirank/collective_sweep.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/datatype.h"
#include "perf/check_data.h"

namespace fairway::testing {
namespace {

const fwDataType_t kTypes[] = {fwInt8, fwUint8, fwInt32, fwUint32, fwInt64, fwUint64,
                               fwFloat16, fwBfloat16, fwFloat32, fwFloat64};
// Read when first swept, after the harness applied FAIRWAY_TEST_ENV. The
// medium count (1K+3) runs each reduction kernel's vector loop and its
// tail for every type and op; the large one spans the transfers' chunks,
// rounds and size windows, which do not depend on the op.
constexpr size_t kCountsSwept = 5;
constexpr size_t kLargeCountIndex = kCountsSwept - 1;
size_t sweptCount(size_t index) {
  static const size_t counts[kCountsSwept] = {0, 1, 7, 1027, sweepLargeCount()};
  return counts[index];
}
const char* kOpNames[] = {"sum", "prod", "max", "min", "avg", "band", "bor", "bxor"};

std::vector<fwRedOp_t> opsFor(const CollectiveCase& c, fwDataType_t type) {
  if (!c.reduces) return {fwSum};
  std::vector<fwRedOp_t> ops = {fwSum, fwProd, fwMax, fwMin, fwAvg};
  if (type <= fwUint64) ops.insert(ops.end(), {fwBand, fwBor, fwBxor});
  return ops;
}

// Whether (type, op) meets the large count: sum always, and one other op
// per type, rotating with the type (over the ten types every op but bxor
// meets it on some type). Every op at the large count on every type made the
// reductions' 8-rank sweeps the longest items of the test suite.
bool sweepsLargeCount(const std::vector<fwRedOp_t>& ops, size_t opIndex, size_t typeIndex) {
  if (opIndex == 0 || ops.size() == 1) return true;
  return opIndex == 1 + typeIndex % (ops.size() - 1);
}

struct Combination {
  fwDataType_t type;
  fwRedOp_t op;
  size_t count;
  bool inPlace;
  bool nonBlocking;
  int root;
  std::string describe(const char* name) const {
    return std::string(name) + " " + datatypeName(type) + " " + kOpNames[op] + " count " + std::to_string(count) +
           (inPlace ? " in-place" : " out-of-place") + (nonBlocking ? " non-blocking" : "") + " root " +
           std::to_string(root);
  }
};

// Runs one combination on this rank; returns its failure count.
int runOne(const RankContext& ctx, fwComm_t comm, const CollectiveCase& c, const Combination& k, int seed,
           const SweepOptions& options) {
  const size_t es = check::elementSize(k.type);
  const size_t sendN = c.sendElements(k.count, ctx.nranks, ctx.rank, k.root);
  const size_t recvN = c.recvElements(k.count, ctx.nranks, ctx.rank, k.root);
  CallArgs a{nullptr, nullptr, k.count, k.type, k.op, k.root, ctx.rank, ctx.nranks, comm, options.stream};

  // In place only where this rank holds both buffers (rooted calls: the root).
  const bool shared = k.inPlace && (!c.rooted || ctx.rank == k.root);
  // The test fills and checks the buffers' host mirrors (the buffers
  // themselves for host memory), copied to and from device memory around
  // the call; what the call should not write stays 0xCD.
  GuardedBuffer one(std::max(sendN, recvN) * es, options.deviceMemory, 0xCD);
  GuardedBuffer other(shared ? 0 : recvN * es, options.deviceMemory, 0xCD);
  if (one.data() == nullptr || other.data() == nullptr) {
    reportFailure(ctx, k.describe(c.name) + ": fwMemAlloc: " + fwGetLastErrorMessage());
    return 1;
  }
  if (shared) {
    size_t sendOffset = 0, recvOffset = 0;
    c.inPlaceOffsets(k.count, ctx.rank, k.root, &sendOffset, &recvOffset);
    a.send = static_cast<char*>(one.data()) + sendOffset * es;
    a.recv = static_cast<char*>(one.data()) + recvOffset * es;
  } else {
    a.send = sendN ? one.data() : nullptr;
    a.recv = recvN ? other.data() : nullptr;
  }
  GuardedBuffer& recvBuffer = shared ? one : other;
  char* hostSend = sendN ? static_cast<char*>(one.hostOf(a.send)) : nullptr;
  void* hostRecv = recvN ? recvBuffer.hostOf(a.recv) : nullptr;
  if (sendN) c.fillInput(hostSend, a, seed);
  std::vector<char> sentCopy;
  if (!shared && sendN) sentCopy.assign(hostSend, hostSend + sendN * es);
  if (!one.toDevice() || !other.toDevice()) {
    reportFailure(ctx, k.describe(c.name) + ": copying the buffers to the device failed");
    return 1;
  }

  fwResult_t result;
  if (k.nonBlocking) {
    fwRequest_t request = nullptr;
    result = c.call(a, &request);
    if (result == fwSuccess) result = fwWait(request);
  } else {
    result = c.call(a, nullptr);
  }
  if (result == fwSuccess && options.synchronize != nullptr && options.synchronize(options.stream) != 0) {
    reportFailure(ctx, k.describe(c.name) + ": the stream did not finish");
    return 1;
  }
  if (result != fwSuccess) {
    reportFailure(ctx, k.describe(c.name) + ": " + fwGetErrorString(result) + ": " + fwGetLastErrorMessage());
    return 1;
  }
  if (!one.fromDevice() || !other.fromDevice()) {
    reportFailure(ctx, k.describe(c.name) + ": copying the buffers from the device failed");
    return 1;
  }
  int failures = 0;
  std::vector<char> expected(std::max<size_t>(recvN, 1) * es);
  size_t compare = c.fillExpected(expected.data(), a, seed);
  size_t wrong = compare ? check::countWrong(hostRecv, expected.data(), k.type, compare) : 0;
  if (wrong) {
    reportFailure(ctx, k.describe(c.name) + ": " + std::to_string(wrong) + " of " + std::to_string(compare) +
                           " elements wrong");
    ++failures;
  }
  if (!one.guardsIntact() || !other.guardsIntact()) {
    reportFailure(ctx, k.describe(c.name) + ": wrote past the end of a buffer");
    ++failures;
  }
  if (!sentCopy.empty() && std::memcmp(sentCopy.data(), hostSend, sentCopy.size()) != 0) {
    reportFailure(ctx, k.describe(c.name) + ": modified the send buffer");
    ++failures;
  }
  return failures;
}

}  // namespace

size_t sweepLargeCount() {
  const char* text = std::getenv("FAIRWAY_TEST_SWEEP_LARGE_COUNT");
  long long n = text ? std::atoll(text) : 0;
  return n > 7 ? static_cast<size_t>(n) : (1u << 20) + 3;
}

int sweepCollective(const RankContext& ctx, const CollectiveCase& c, const SweepOptions& options) {
  if (c.algorithm != nullptr) setenv("FAIRWAY_ALGO", c.algorithm, 1);  // this rank's process only
  if (!options.nodeOfRank.empty()) setenv("FAIRWAY_NODE_ID", options.nodeOfRank[ctx.rank].c_str(), 1);
  fwComm_t comm = nullptr;
  if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) {
    reportFailure(ctx, std::string("fwCommInitRank: ") + fwGetLastErrorMessage());
    return 1;
  }
  int failures = 0;
  int seed = 0;
  const std::vector<fwDataType_t> types =
      options.types.empty() ? std::vector<fwDataType_t>(std::begin(kTypes), std::end(kTypes)) : options.types;
  for (size_t typeIndex = 0; typeIndex < types.size(); ++typeIndex) {
    const fwDataType_t type = types[typeIndex];
    const std::vector<fwRedOp_t> ops = opsFor(c, type);
    for (size_t opIndex = 0; opIndex < ops.size(); ++opIndex) {
      const fwRedOp_t op = ops[opIndex];
      for (size_t countIndex = 0; countIndex < kCountsSwept; ++countIndex) {
        if (countIndex == kLargeCountIndex && !sweepsLargeCount(ops, opIndex, typeIndex)) continue;
        for (bool inPlace : {false, true}) {
          if (inPlace && !c.hasInPlace) continue;
          ++seed;
          // Roots and the non-blocking path vary across combinations.
          Combination k{type, op, sweptCount(countIndex), inPlace, !options.deviceMemory && seed % 3 == 0,
                        static_cast<int>((seed / 2) % ctx.nranks)};
          failures += runOne(ctx, comm, c, k, seed, options);
        }
      }
    }
  }
  if (fwCommDestroy(comm) != fwSuccess) {
    reportFailure(ctx, std::string("fwCommDestroy: ") + fwGetLastErrorMessage());
    ++failures;
  }
  return failures;
}

}  // namespace fairway::testing
