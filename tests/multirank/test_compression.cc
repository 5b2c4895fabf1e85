// Compressed allreduce, reduce-scatter and allgather on forked ranks:
// accuracy of the block formats on Gaussian data against the exact sum,
// the casts bit for bit against cast-then-reduce, error feedback, every
// layout of the two-phase tests with the odd counts, the same bits on
// every rank, and each refused combination with its code.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/multirank/rank_harness.h"

namespace fairway::testing {
namespace {

void expectAllSucceeded(const std::vector<RankOutcome>& outcomes) {
  for (size_t r = 0; r < outcomes.size(); ++r) {
    EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
    EXPECT_FALSE(outcomes[r].timedOut) << "rank " << r << " hung";
  }
}

// ---- data ----

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A standard normal value for (seed, rank, index), the same in every process.
float gaussianAt(uint64_t seed, int rank, size_t i) {
  const uint64_t h = mix(mix(seed * 1000003 + static_cast<uint64_t>(rank)) ^ i);
  const double u1 = (static_cast<double>(h >> 11) + 1) / 9007199254740993.0;
  const double u2 = static_cast<double>(mix(h) >> 11) / 9007199254740992.0;
  return static_cast<float>(std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

// Values that fp16 and bf16 hold exactly and whose sums over up to 9
// ranks float32 holds exactly: multiples of 1/64 up to 1 in magnitude.
float exactAt(uint64_t seed, int rank, size_t i) {
  return static_cast<float>(static_cast<int>(mix(seed ^ mix(rank * 7919 + i)) % 129) - 64) / 64.f;
}

using Generator = float (*)(uint64_t, int, size_t);

std::vector<float> inputOf(Generator g, uint64_t seed, int rank, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = g(seed, rank, i);
  return v;
}

// The exact result at element i of what rank `rank` receives.
double exactSum(Generator g, uint64_t seed, int nranks, size_t inputIndex) {
  double sum = 0;
  for (int q = 0; q < nranks; ++q) sum += g(seed, q, inputIndex);
  return sum;
}

double relativeL2(const std::vector<float>& out, const std::vector<double>& ref) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    err += (out[i] - ref[i]) * (out[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return norm == 0 ? std::sqrt(err) : std::sqrt(err / norm);
}

// Round to nearest even, as the wire formats do.
float roundToHalf(float v) { return static_cast<float>(static_cast<_Float16>(v)); }
float roundToBf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits += 0x7fff + ((bits >> 16) & 1);
  bits &= 0xffff0000u;
  std::memcpy(&v, &bits, 4);
  return v;
}
float castTo(fwCompressKind_t kind, float v) { return kind == fwCompressFp16 ? roundToHalf(v) : roundToBf16(v); }

fwCompression_t compressionOf(fwCompressKind_t kind, int block = 0, float* residual = nullptr) {
  fwCompression_t c = FW_COMPRESSION_INITIALIZER;
  c.kind = kind;
  c.blockSize = block;
  c.residual = residual;
  return c;
}

// Whether every rank's bytes hash alike (checked through an allgather).
bool sameOnEveryRank(const RankContext& ctx, fwComm_t comm, const void* data, size_t bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ static_cast<const uint8_t*>(data)[i]) * 0x100000001b3ull;
  std::vector<uint64_t> all(ctx.nranks);
  if (fwAllGather(&h, all.data(), 1, fwUint64, comm, nullptr) != fwSuccess) return false;
  for (uint64_t other : all) if (other != h) return false;
  return true;
}

// ---- one compressed call, checked ----

struct Call {
  bool allreduce = true;
  fwCompressKind_t kind = fwCompressInt8;
  size_t count = 0;  // allreduce: count; reduce-scatter: recvcount
  fwRedOp_t op = fwSum;
  bool inPlace = false;
  bool nonBlocking = false;
  Generator data = gaussianAt;
  uint64_t seed = 1;
};

// Runs the call and returns the relative L2 error of this rank's result
// (negative after a failure, which it reports).
double runCall(const RankContext& ctx, fwComm_t comm, const Call& c, std::vector<float>* result = nullptr) {
  const int n = ctx.nranks;
  const size_t inputCount = c.allreduce ? c.count : c.count * n;
  std::vector<float> input = inputOf(c.data, c.seed, ctx.rank, inputCount);
  GuardedBuffer send(inputCount * 4), recv(c.count * 4);
  std::memcpy(send.data(), input.data(), inputCount * 4);
  float* out = static_cast<float*>(recv.data());
  const float* in = static_cast<const float*>(send.data());
  if (c.inPlace) out = c.allreduce ? static_cast<float*>(send.data()) : static_cast<float*>(send.data()) + ctx.rank * c.count;
  const fwCompression_t compression = compressionOf(c.kind);
  fwResult_t r;
  if (c.nonBlocking) {
    fwRequest_t request = nullptr;
    r = c.allreduce ? fwIallReduceCompressed(in, out, c.count, fwFloat32, c.op, &compression, comm, &request)
                    : fwIreduceScatterCompressed(in, out, c.count, fwFloat32, c.op, &compression, comm, &request);
    if (r == fwSuccess) r = fwWait(request);
  } else {
    r = c.allreduce ? fwAllReduceCompressed(in, out, c.count, fwFloat32, c.op, &compression, comm, nullptr)
                    : fwReduceScatterCompressed(in, out, c.count, fwFloat32, c.op, &compression, comm, nullptr);
  }
  const std::string what = std::string(c.allreduce ? "allreduce" : "reducescatter") + " kind " +
                           std::to_string(c.kind) + " count " + std::to_string(c.count) +
                           (c.inPlace ? " in place" : "") + (c.nonBlocking ? " non-blocking" : "");
  if (r != fwSuccess) {
    reportFailure(ctx, what + ": " + fwGetErrorString(r) + ": " + fwGetLastErrorMessage());
    return -1;
  }
  if (!send.guardsIntact() || !recv.guardsIntact()) {
    reportFailure(ctx, what + ": wrote past a buffer");
    return -1;
  }
  if (!c.inPlace && std::memcmp(send.data(), input.data(), inputCount * 4) != 0) {
    reportFailure(ctx, what + ": changed sendbuff");
    return -1;
  }
  std::vector<float> got(out, out + c.count);
  std::vector<double> ref(c.count);
  const double divisor = c.op == fwAvg ? n : 1;
  for (size_t i = 0; i < c.count; ++i) {
    ref[i] = exactSum(c.data, c.seed, n, c.allreduce ? i : ctx.rank * c.count + i) / divisor;
  }
  if (c.allreduce && !sameOnEveryRank(ctx, comm, got.data(), got.size() * 4)) {
    reportFailure(ctx, what + ": ranks hold different results");
    return -1;
  }
  if (result != nullptr) *result = got;
  return relativeL2(got, ref);
}

fwComm_t initComm(const RankContext& ctx) {
  fwComm_t comm = nullptr;
  if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) {
    reportFailure(ctx, std::string("init: ") + fwGetLastErrorMessage());
    return nullptr;
  }
  return comm;
}

// ---- accuracy on 8 ranks of one node (flat) ----

struct Bound {
  fwCompressKind_t kind;
  double reduceScatter, allreduce;  // the bounds: one and two quantizations
};

TEST(Compression, BlockFormatsMeetTheirErrorBoundsOnEightRanks) {
  expectAllSucceeded(runRanks(8, [](const RankContext& ctx) {
    int failures = 0;
    fwComm_t comm = initComm(ctx);
    if (comm == nullptr) return 1;
    for (const Bound& b : {Bound{fwCompressInt8, 0.01, 0.015}, Bound{fwCompressInt4, 0.15, 0.20}}) {
      for (fwRedOp_t op : {fwSum, fwAvg}) {
        Call rs;
        rs.allreduce = false;
        rs.kind = b.kind;
        rs.count = 1 << 15;
        rs.op = op;
        Call ar = rs;
        ar.allreduce = true;
        ar.count = 1 << 18;
        const double rsError = runCall(ctx, comm, rs), arError = runCall(ctx, comm, ar);
        RANK_CHECK(ctx, rsError >= 0 && rsError <= b.reduceScatter,
                   "reduce-scatter error " + std::to_string(rsError) + " for kind " + std::to_string(b.kind));
        RANK_CHECK(ctx, arError >= 0 && arError <= b.allreduce,
                   "allreduce error " + std::to_string(arError) + " for kind " + std::to_string(b.kind));
        if (ctx.rank == 0 && op == fwSum) {
          std::printf("8 ranks, %s blocks of 256, Gaussian: reduce-scatter %.3f%%, allreduce %.3f%% relative L2\n",
                      b.kind == fwCompressInt8 ? "int8" : "int4", 100 * rsError, 100 * arError);
        }
      }
    }
    fwCommDestroy(comm);
    return failures;
  }));
}

// fp16 and bf16 on general data, flat: exactly cast each input, sum the
// casts in float32 in rank order; allreduce casts that sum once more.
TEST(Compression, CastsEqualCastThenReduceBitForBit) {
  expectAllSucceeded(runRanks(5, [](const RankContext& ctx) {
    int failures = 0;
    fwComm_t comm = initComm(ctx);
    if (comm == nullptr) return 1;
    const int n = ctx.nranks;
    for (fwCompressKind_t kind : {fwCompressFp16, fwCompressBf16}) {
      for (bool allreduce : {false, true}) {
        Call c;
        c.allreduce = allreduce;
        c.kind = kind;
        c.count = allreduce ? 100003 : 20011;
        c.seed = 77;
        std::vector<float> got;
        if (runCall(ctx, comm, c, &got) < 0) {
          ++failures;
          continue;
        }
        size_t wrong = 0;
        for (size_t i = 0; i < c.count; ++i) {
          float acc = 0;
          const size_t at = allreduce ? i : ctx.rank * c.count + i;
          for (int q = 0; q < n; ++q) acc = q == 0 ? castTo(kind, gaussianAt(77, q, at)) : acc + castTo(kind, gaussianAt(77, q, at));
          const float expected = allreduce ? castTo(kind, acc) : acc;
          if (std::memcmp(&expected, &got[i], 4) != 0) ++wrong;
        }
        RANK_CHECK(ctx, wrong == 0, std::to_string(wrong) + " elements differ from cast-then-reduce");
      }
      // Allgather: every rank's block cast once, the same bits everywhere.
      const size_t count = 4099;
      std::vector<float> mine = inputOf(gaussianAt, 5, ctx.rank, count), all(count * n);
      const fwCompression_t c = compressionOf(kind);
      RANK_CHECK(ctx, fwAllGatherCompressed(mine.data(), all.data(), count, fwFloat32, &c, comm, nullptr) == fwSuccess,
                 "allgather");
      size_t wrong = 0;
      for (int q = 0; q < n; ++q) {
        for (size_t i = 0; i < count; ++i) wrong += all[q * count + i] != castTo(kind, gaussianAt(5, q, i));
      }
      RANK_CHECK(ctx, wrong == 0, std::to_string(wrong) + " allgathered elements are not the cast");
    }
    fwCommDestroy(comm);
    return failures;
  }));
}

// Half-precision inputs reduce too (their casts and blocks read 16-bit values).
TEST(Compression, HalfPrecisionInputs) {
  expectAllSucceeded(runRanks(3, [](const RankContext& ctx) {
    int failures = 0;
    fwComm_t comm = initComm(ctx);
    if (comm == nullptr) return 1;
    const size_t count = 30000;
    std::vector<_Float16> in(count), out(count);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<_Float16>(exactAt(3, ctx.rank, i));
    for (fwCompressKind_t kind : {fwCompressFp16, fwCompressBf16, fwCompressInt8}) {
      const fwCompression_t c = compressionOf(kind);
      RANK_CHECK(ctx, fwAllReduceCompressed(in.data(), out.data(), count, fwFloat16, fwSum, &c, comm, nullptr) ==
                          fwSuccess, "float16 allreduce");
      double err = 0, norm = 0;
      for (size_t i = 0; i < count; ++i) {
        const double ref = exactSum(exactAt, 3, ctx.nranks, i);
        err += (static_cast<double>(out[i]) - ref) * (static_cast<double>(out[i]) - ref);
        norm += ref * ref;
      }
      const double rel = std::sqrt(err / norm);
      RANK_CHECK(ctx, kind == fwCompressInt8 ? rel < 0.015 : rel == 0,
                 "float16 input, kind " + std::to_string(kind) + ": error " + std::to_string(rel));
    }
    fwCommDestroy(comm);
    return failures;
  }));
}

// ---- error feedback ----

class ErrorFeedback : public ::testing::TestWithParam<bool> {};

// The same data allreduced 50 times with a residual: the mean of the
// results is far closer to the exact sum than one result is.
TEST_P(ErrorFeedback, MeanOfRepeatedAllreducesConverges) {
  const bool twoNodes = GetParam();
  expectAllSucceeded(runRanks(8, [twoNodes](const RankContext& ctx) {
    int failures = 0;
    if (twoNodes) setenv("FAIRWAY_NODE_ID", ctx.rank < 4 ? "a" : "b", 1);
    setenv("FAIRWAY_ALGO", twoNodes ? "allreduce:compressed_twophase" : "allreduce:compressed_flat", 1);
    fwComm_t comm = initComm(ctx);
    if (comm == nullptr) return 1;
    const size_t count = 1 << 16;
    const int calls = 50;
    const std::vector<float> input = inputOf(gaussianAt, 9, ctx.rank, count);
    std::vector<double> ref(count), mean(count, 0.0);
    for (size_t i = 0; i < count; ++i) ref[i] = exactSum(gaussianAt, 9, ctx.nranks, i);
    std::vector<float> residual(count, 0.f), out(count);
    double single = -1;
    for (int t = 0; t < calls; ++t) {
      const fwCompression_t c = compressionOf(fwCompressInt8, 256, residual.data());
      if (fwAllReduceCompressed(input.data(), out.data(), count, fwFloat32, fwSum, &c, comm, nullptr) != fwSuccess) {
        reportFailure(ctx, std::string("allreduce with a residual: ") + fwGetLastErrorMessage());
        return failures + 1;
      }
      if (t == 0) single = relativeL2(out, ref);
      for (size_t i = 0; i < count; ++i) mean[i] += out[i] / static_cast<double>(calls);
    }
    std::vector<float> meanAsFloat(mean.begin(), mean.end());
    const double averaged = relativeL2(meanAsFloat, ref);
    RANK_CHECK(ctx, averaged < 0.1 * single, "mean error " + std::to_string(averaged) + " against one call's " +
                                                 std::to_string(single));
    if (ctx.rank == 0) {
      std::printf("%s, int8 with error feedback: one call %.4f%%, mean of %d calls %.4f%%\n",
                  twoNodes ? "2x4 (compressed_twophase)" : "8 ranks (compressed_flat)", 100 * single, calls,
                  100 * averaged);
    }
    fwCommDestroy(comm);
    return failures;
  }));
}

INSTANTIATE_TEST_SUITE_P(Layouts, ErrorFeedback, ::testing::Bool(), [](const ::testing::TestParamInfo<bool>& info) {
  return std::string(info.param ? "TwoNodes" : "OneNode");
});

// ---- every layout, the odd counts ----

struct LayoutCase {
  const char* name;
  std::vector<std::string> nodeOfRank;
  const char* algorithm;  // FAIRWAY_ALGO, or null for the model's choice
};

const std::vector<LayoutCase>& layoutCases() {
  static const std::vector<LayoutCase> cases = [] {
    const std::vector<std::pair<const char*, std::vector<std::string>>> layouts = {
        {"2x4", {"a", "a", "a", "a", "b", "b", "b", "b"}},
        {"4x2", {"a", "a", "b", "b", "c", "c", "d", "d"}},
        {"3x3", {"a", "a", "a", "b", "b", "b", "c", "c", "c"}},
        {"3plus2_permuted", {"a", "b", "a", "b", "b"}},
        {"2x3_interleaved", {"a", "b", "a", "b", "a", "b"}},
        {"3x2_permuted", {"c", "a", "b", "b", "a", "c"}},
    };
    std::vector<LayoutCase> out;
    for (const auto& [name, nodes] : layouts) {
      out.push_back({name, nodes, "allreduce:compressed_twophase;reducescatter:compressed_twophase"});
      out.push_back({name, nodes, "allreduce:compressed_flat;reducescatter:compressed_flat"});
    }
    return out;
  }();
  return cases;
}

class CompressionLayouts : public ::testing::TestWithParam<int> {};

TEST_P(CompressionLayouts, EveryCountWithinBoundsAndTheSameOnEveryRank) {
  const LayoutCase& layout = layoutCases()[GetParam()];
  const int nranks = static_cast<int>(layout.nodeOfRank.size());
  expectAllSucceeded(runRanks(nranks, [&layout](const RankContext& ctx) {
    int failures = 0;
    setenv("FAIRWAY_NODE_ID", layout.nodeOfRank[ctx.rank].c_str(), 1);
    setenv("FAIRWAY_ALGO", layout.algorithm, 1);
    // Small slices, so the pipeline runs many of them.
    setenv("FAIRWAY_SLICE_BYTES", "262144", 1);
    setenv("FAIRWAY_MIN_SHARD_BYTES", "4096", 1);
    // 4x2 and 3x3 exchange along the rail in rounds of two and one peers.
    if (std::string(layout.name) == "4x2") setenv("FAIRWAY_RAIL_PEERS_IN_FLIGHT", "2", 1);
    if (std::string(layout.name) == "3x3") setenv("FAIRWAY_RAIL_PEERS_IN_FLIGHT", "1", 1);
    fwComm_t comm = initComm(ctx);
    if (comm == nullptr) return 1;
    int variant = 0;
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{255}, size_t{257}, (size_t{1} << 20) + 3}) {
      for (bool allreduce : {true, false}) {
        ++variant;
        Call c;
        c.allreduce = allreduce;
        c.count = allreduce || count < 1000 ? count : (count >> 3) + 3;  // reduce-scatter: per rank
        c.kind = fwCompressInt8;
        c.op = variant % 3 == 0 ? fwAvg : fwSum;
        c.inPlace = variant % 2 == 0;
        c.nonBlocking = variant % 5 == 0;
        const double error = runCall(ctx, comm, c);
        RANK_CHECK(ctx, error >= 0 && error <= (allreduce ? 0.015 : 0.01),
                   std::string(allreduce ? "allreduce" : "reducescatter") + " of " + std::to_string(c.count) +
                       ": error " + std::to_string(error));
        // The casts on data every layout sums exactly: exactly the cast sum.
        Call exact = c;
        exact.kind = variant % 2 ? fwCompressFp16 : fwCompressBf16;
        exact.data = exactAt;
        exact.op = fwSum;
        std::vector<float> got;
        if (runCall(ctx, comm, exact, &got) < 0) {
          ++failures;
          continue;
        }
        size_t wrong = 0;
        for (size_t i = 0; i < exact.count; ++i) {
          const double sum = exactSum(exactAt, exact.seed, ctx.nranks, allreduce ? i : ctx.rank * exact.count + i);
          const float expected = allreduce ? castTo(exact.kind, static_cast<float>(sum)) : static_cast<float>(sum);
          wrong += got[i] != expected;
        }
        RANK_CHECK(ctx, wrong == 0, std::to_string(wrong) + " elements differ from the cast of the exact sum");
      }
    }
    fwCommDestroy(comm);
    return failures;
  }));
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, CompressionLayouts,
                         ::testing::Range(0, static_cast<int>(layoutCases().size())),
                         [](const ::testing::TestParamInfo<int>& info) {
                           const LayoutCase& c = layoutCases()[info.param];
                           return std::string(c.name) +
                                  (std::string(c.algorithm).find("twophase") != std::string::npos ? "_twophase"
                                                                                                   : "_flat");
                         });

// ---- FAIRWAY_COMPRESS: unmodified programs ----

TEST(Compression, EnvironmentCompressesQualifyingPlainCalls) {
  expectAllSucceeded(runRanks(4, [](const RankContext& ctx) {
    int failures = 0;
    setenv("FAIRWAY_COMPRESS", "allreduce:int8:64K;allgather:bf16", 1);
    fwComm_t comm = initComm(ctx);
    if (comm == nullptr) return 1;
    auto error = [&](size_t count) {
      std::vector<float> in = inputOf(gaussianAt, 4, ctx.rank, count), out(count);
      std::vector<double> ref(count);
      for (size_t i = 0; i < count; ++i) ref[i] = exactSum(gaussianAt, 4, ctx.nranks, i);
      if (fwAllReduce(in.data(), out.data(), count, fwFloat32, fwSum, comm, nullptr) != fwSuccess) return -1.0;
      return relativeL2(out, ref);
    };
    const double large = error(1 << 16), small = error(1000);
    RANK_CHECK(ctx, large > 1e-4 && large < 0.015, "256 KiB allreduce error " + std::to_string(large));
    RANK_CHECK(ctx, small >= 0 && small < 1e-6, "4 KB allreduce (below the minimum) error " + std::to_string(small));
    std::vector<int32_t> ints(1 << 16, ctx.rank + 1), sums(1 << 16);
    RANK_CHECK(ctx, fwAllReduce(ints.data(), sums.data(), ints.size(), fwInt32, fwSum, comm, nullptr) == fwSuccess &&
                        sums[123] == 10, "int32 allreduce stays exact");
    std::vector<float> mine(100, 1.f / 3), all(100 * ctx.nranks);
    RANK_CHECK(ctx, fwAllGather(mine.data(), all.data(), 100, fwFloat32, comm, nullptr) == fwSuccess &&
                        all[250] == roundToBf16(1.f / 3) && all[250] != 1.f / 3, "allgather carries bf16");
    fwCommDestroy(comm);
    return failures;
  }));
}

// ---- refusals ----

struct Refusal {
  const char* what;
  fwResult_t code;
  const char* message;  // a part of fwGetLastErrorMessage()
};

TEST(Compression, RefusedCombinationsNameTheProblem) {
  expectAllSucceeded(runRanks(2, [](const RankContext& ctx) {
    int failures = 0;
    fwComm_t comm = initComm(ctx);
    if (comm == nullptr) return 1;
    const size_t count = 64;
    std::vector<float> send(count * 2, 1.f), recv(count * 2, -5.f), residual(count * 2, 0.f);
    std::vector<int32_t> ints(count * 2, 1);
    auto expect = [&](const Refusal& r, fwResult_t got) {
      const std::string message = fwGetLastErrorMessage();
      RANK_CHECK(ctx, got == r.code, std::string(r.what) + ": got " + fwGetErrorString(got));
      RANK_CHECK(ctx, message.find(r.message) != std::string::npos,
                 std::string(r.what) + ": message '" + message + "' lacks '" + r.message + "'");
      RANK_CHECK(ctx, recv[0] == -5.f, std::string(r.what) + ": recvbuff was written");
    };
    auto allreduce = [&](const fwCompression_t* c, fwDataType_t type = fwFloat32, fwRedOp_t op = fwSum) {
      const void* in = type == fwInt32 ? static_cast<const void*>(ints.data()) : send.data();
      return fwAllReduceCompressed(in, recv.data(), count, type, op, c, comm, nullptr);
    };
    fwCompression_t c = compressionOf(fwCompressInt8);
    expect({"NULL descriptor", fwInvalidPointer, "compression is NULL"}, allreduce(nullptr));
    fwCompression_t sized = c;
    sized.size = 4;
    expect({"bad size", fwInvalidArgument, "compression->size is 4"}, allreduce(&sized));
    fwCompression_t kind = c;
    kind.kind = static_cast<fwCompressKind_t>(9);
    expect({"unknown kind", fwUnsupportedCompression, "not a fwCompressKind_t"}, allreduce(&kind));
    for (int block : {16, 33, 8192, -256}) {
      fwCompression_t b = compressionOf(fwCompressInt4, block);
      expect({"block size", fwUnsupportedCompression, "not a power of two from 32 to 4096"}, allreduce(&b));
    }
    expect({"int32 data", fwUnsupportedCompression, "fwFloat32, fwFloat16 or fwBfloat16 data, not int32"},
           allreduce(&c, fwInt32));
    std::vector<double> doubles(count, 1.0);
    expect({"float64 data", fwUnsupportedCompression, "not double"},
           fwAllReduceCompressed(doubles.data(), recv.data(), count / 2, fwFloat64, fwSum, &c, comm, nullptr));
    expect({"max", fwUnsupportedCompression, "sum or avg, not max"}, allreduce(&c, fwFloat32, fwMax));
    expect({"op out of range", fwInvalidOp, "is not a fwRedOp_t"}, allreduce(&c, fwFloat32, static_cast<fwRedOp_t>(42)));
    expect({"int8 allgather", fwUnsupportedCompression, "casts only"},
           fwAllGatherCompressed(send.data(), recv.data(), count, fwFloat32, &c, comm, nullptr));
    fwCompression_t castWithResidual = compressionOf(fwCompressFp16, 0, residual.data());
    expect({"allgather residual", fwUnsupportedCompression, "no error-feedback residual"},
           fwAllGatherCompressed(send.data(), recv.data(), count, fwFloat32, &castWithResidual, comm, nullptr));
    fwCompression_t overlapping = compressionOf(fwCompressInt8, 0, send.data() + 8);
    expect({"residual inside sendbuff", fwInvalidArgument, "the residual overlaps sendbuff"}, allreduce(&overlapping));
    fwRequest_t request = nullptr;
    expect({"non-blocking max", fwUnsupportedCompression, "sum or avg"},
           fwIallReduceCompressed(send.data(), recv.data(), count, fwFloat32, fwMax, &c, comm, &request));
    RANK_CHECK(ctx, request == nullptr, "a refused call returned a request");
    // The communicator still works, and compressionless descriptors run the plain collective.
    fwCompression_t none = FW_COMPRESSION_INITIALIZER;
    RANK_CHECK(ctx, allreduce(&none) == fwSuccess && recv[0] == 2.f, "fwCompressNone after refusals");
    fwCommDestroy(comm);
    return failures;
  }));
}

}  // namespace
}  // namespace fairway::testing
