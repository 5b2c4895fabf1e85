// The compression kernels on one process: round trips within half a
// quantization step, blocks holding Inf or NaN, error feedback, casts
// rounding to nearest even, and the baseline and AVX2 sets giving the
// same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/compression.h"
#include "core/datatype.h"
#include "core/quantize_kernels.h"
#include "core/reduce_kernels.h"
#include "core/reducer.h"

namespace fairway {
namespace {

std::vector<float> gaussian(size_t n, unsigned seed, float sigma = 1.f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

Compression blockFormat(fwCompressKind_t kind, int block) {
  Compression c;
  c.kind = kind;
  c.blockSize = block;
  return c;
}

float levels(fwCompressKind_t kind) { return kind == fwCompressInt8 ? 127.f : 7.f; }

TEST(Quantize, RoundTripWithinHalfAStep) {
  for (fwCompressKind_t kind : {fwCompressInt8, fwCompressInt4}) {
    for (int block : {32, 256, 4096}) {
      for (size_t n : {size_t{1}, size_t{7}, size_t{255}, size_t{257}, size_t{10007}}) {
        const Compression c = blockFormat(kind, block);
        const std::vector<float> x = gaussian(n, static_cast<unsigned>(n + block));
        std::vector<uint8_t> wire(c.encodedBytes(n));
        std::vector<float> back(n);
        const kernels::Codec codec = kernels::codecFor(kind, fwFloat32);
        codec.encode(x.data(), nullptr, n, block, wire.data(), kernels::Lost{});
        codec.decode(wire.data(), n, block, back.data());
        for (size_t b = 0; b * block < n; ++b) {
          float absmax = 0;
          const size_t end = std::min(n, (b + 1) * block);
          for (size_t i = b * block; i < end; ++i) absmax = std::max(absmax, std::fabs(x[i]));
          const float step = absmax / levels(kind);
          for (size_t i = b * block; i < end; ++i) {
            ASSERT_LE(std::fabs(back[i] - x[i]), 0.5f * step * (1 + 1e-5f))
                << compressionName(kind) << " block " << block << " n " << n << " at " << i;
          }
        }
      }
    }
  }
}

TEST(Quantize, EncodedSizes) {
  EXPECT_EQ(blockFormat(fwCompressInt8, 256).encodedBytes(257), 2 * 4 + 257u);
  EXPECT_EQ(blockFormat(fwCompressInt4, 256).encodedBytes(257), 2 * 4 + 129u);
  EXPECT_EQ(blockFormat(fwCompressFp16, 256).encodedBytes(257), 514u);
  EXPECT_EQ(blockFormat(fwCompressInt8, 32).encodedBytes(0), 0u);
}

TEST(Quantize, NonFiniteValuesSpoilOnlyTheirBlock) {
  for (fwCompressKind_t kind : {fwCompressInt8, fwCompressInt4}) {
    for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN()}) {
      const int block = 32;
      std::vector<float> x = gaussian(4 * block, 7);
      x[block + 5] = bad;  // block 1
      const Compression c = blockFormat(kind, block);
      std::vector<uint8_t> wire(c.encodedBytes(x.size()));
      std::vector<float> back(x.size()), residual(x.size(), 0.f);
      const kernels::Codec codec = kernels::codecFor(kind, fwFloat32);
      codec.encode(x.data(), residual.data(), x.size(), block, wire.data(), kernels::Lost{residual.data(), 1, false});
      codec.decode(wire.data(), x.size(), block, back.data());
      for (size_t i = 0; i < x.size(); ++i) {
        const bool inBadBlock = i / block == 1;
        if (inBadBlock) {
          EXPECT_TRUE(std::isnan(back[i])) << "element " << i;
          EXPECT_EQ(residual[i], 0.f) << "the residual does not carry a non-finite block";
        } else {
          EXPECT_TRUE(std::isfinite(back[i])) << "element " << i;
          EXPECT_TRUE(std::isfinite(residual[i]));
          EXPECT_NEAR(back[i], x[i], 0.5 * 4.5 / levels(kind) + 1e-6);
        }
      }
    }
  }
}

TEST(Quantize, AllZeroBlockStaysZero) {
  const Compression c = blockFormat(fwCompressInt8, 32);
  std::vector<float> x(64, 0.f), back(64, 1.f);
  std::vector<uint8_t> wire(c.encodedBytes(64));
  const kernels::Codec codec = kernels::codecFor(fwCompressInt8, fwFloat32);
  codec.encode(x.data(), nullptr, 64, 32, wire.data(), kernels::Lost{});
  codec.decode(wire.data(), 64, 32, back.data());
  for (float v : back) EXPECT_EQ(v, 0.f);
}

// x + residual is encoded, and the residual becomes what that lost: the
// decoded value plus the new residual gives back x + old residual.
TEST(Quantize, ErrorFeedbackKeepsWhatWasLost) {
  for (fwCompressKind_t kind : {fwCompressInt8, fwCompressInt4, fwCompressFp16, fwCompressBf16}) {
    const size_t n = 1000;
    const std::vector<float> x = gaussian(n, 3);
    std::vector<float> residual = gaussian(n, 4, 0.01f);
    const std::vector<float> before = residual;
    const Compression c = blockFormat(kind, 256);
    std::vector<uint8_t> wire(c.encodedBytes(n));
    std::vector<float> back(n);
    const kernels::Codec codec = kernels::codecFor(kind, fwFloat32);
    codec.encode(x.data(), residual.data(), n, 256, wire.data(), kernels::Lost{residual.data(), 1, false});
    codec.decode(wire.data(), n, 256, back.data());
    for (size_t i = 0; i < n; ++i) {
      EXPECT_NEAR(back[i] + residual[i], x[i] + before[i], 1e-6) << compressionName(kind) << " at " << i;
    }
  }
}

uint16_t referenceHalf(float v) { return floatToHalf(v); }
uint16_t referenceBf16(float v) { return floatToBfloat16(v); }

TEST(Quantize, CastsRoundToNearestEven) {
  std::vector<float> x = gaussian(4099, 11, 1000.f);
  x.push_back(65520.f);  // rounds to Inf in fp16
  x.push_back(1.f + 1.f / 2048);  // a tie in fp16: to even (1.0)
  for (fwCompressKind_t kind : {fwCompressFp16, fwCompressBf16}) {
    std::vector<uint16_t> wire(x.size());
    const kernels::Codec codec = kernels::codecFor(kind, fwFloat32);
    codec.encode(x.data(), nullptr, x.size(), 256, wire.data(), kernels::Lost{});
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t expected = kind == fwCompressFp16 ? referenceHalf(x[i]) : referenceBf16(x[i]);
      ASSERT_EQ(wire[i], expected) << compressionName(kind) << " of " << x[i];
    }
  }
}

// Decode-and-add in float32 equals decode then add.
TEST(Quantize, DecodeAddAccumulatesInFloat) {
  const size_t n = 777;
  const Compression c = blockFormat(fwCompressInt4, 64);
  const kernels::Codec codec = kernels::codecFor(c.kind, fwFloat32);
  std::vector<float> acc(n), expect(n, 0.f), back(n);
  for (int source = 0; source < 3; ++source) {
    const std::vector<float> x = gaussian(n, 20 + source);
    std::vector<uint8_t> wire(c.encodedBytes(n));
    codec.encode(x.data(), nullptr, n, 64, wire.data(), kernels::Lost{});
    codec.decodeAdd(wire.data(), n, 64, acc.data(), source == 0);
    codec.decode(wire.data(), n, 64, back.data());
    for (size_t i = 0; i < n; ++i) expect[i] = source == 0 ? back[i] : expect[i] + back[i];
  }
  EXPECT_EQ(0, std::memcmp(acc.data(), expect.data(), n * sizeof(float)));
}

// Every kernel of the two sets on the same inputs: the same bytes out.
TEST(Quantize, BaselineAndAvx2GiveTheSameBits) {
  if (!kernels::avx2Usable()) GTEST_SKIP() << "CPU lacks AVX2/F16C";
  const size_t n = 5000;
  std::vector<float> x = gaussian(n, 5, 3.f);
  x[300] = std::numeric_limits<float>::infinity();
  x[1000] = std::numeric_limits<float>::quiet_NaN();
  x[2000] = 1e-42f;  // subnormal
  for (fwDataType_t type : {fwFloat32, fwFloat16, fwBfloat16}) {
    const size_t es = datatypeSize(type);
    std::vector<uint8_t> input(n * es);
    kernels::baseline::fromFloatFor(type)(x.data(), n, input.data());
    for (fwCompressKind_t kind : {fwCompressFp16, fwCompressBf16, fwCompressInt8, fwCompressInt4}) {
      for (int block : {32, 256}) {
        const Compression c = blockFormat(kind, block);
        const kernels::Codec sets[2] = {kernels::baseline::codecFor(kind, type), kernels::avx2::codecFor(kind, type)};
        std::vector<uint8_t> wire[2], decoded[2];
        std::vector<float> residual[2], acc[2];
        for (int s = 0; s < 2; ++s) {
          wire[s].assign(c.encodedBytes(n), 0);
          residual[s] = gaussian(n, 9, 0.01f);
          sets[s].encode(input.data(), residual[s].data(), n, block, wire[s].data(),
                         kernels::Lost{residual[s].data(), 3.f, true});
          decoded[s].assign(n * es, 0);
          sets[s].decode(wire[s].data(), n, block, decoded[s].data());
          acc[s] = gaussian(n, 10);
          sets[s].decodeAdd(wire[s].data(), n, block, acc[s].data(), false);
        }
        const std::string what = std::string(compressionName(kind)) + " of " + datatypeName(type);
        EXPECT_EQ(wire[0], wire[1]) << what;
        EXPECT_EQ(decoded[0], decoded[1]) << what;
        EXPECT_EQ(0, std::memcmp(residual[0].data(), residual[1].data(), n * 4)) << what;
        EXPECT_EQ(0, std::memcmp(acc[0].data(), acc[1].data(), n * 4)) << what;
      }
    }
    std::vector<uint8_t> sums[2];
    for (int s = 0; s < 2; ++s) {
      sums[s].assign(n * es, 0);
      (s == 0 ? kernels::baseline::addFloatFor(type) : kernels::avx2::addFloatFor(type))(sums[s].data(), input.data(),
                                                                                        x.data(), n);
    }
    EXPECT_EQ(sums[0], sums[1]) << datatypeName(type);
  }
}

}  // namespace
}  // namespace fairway

namespace fairway {
namespace {

struct Fp8Format {
  const char* name;
  float (*decode)(uint8_t);
  uint8_t (*encode)(float);
  float largest;
  bool hasInfinity;
};
const Fp8Format kFp8[] = {{"e4m3", float8e4m3ToFloat, floatToFloat8e4m3, 448.f, false},
                          {"e5m2", float8e5m2ToFloat, floatToFloat8e5m2, 57344.f, true}};

TEST(Fp8, EveryCodeRoundTrips) {
  for (const Fp8Format& f : kFp8) {
    int nans = 0;
    for (int c = 0; c < 256; ++c) {
      const float v = f.decode(static_cast<uint8_t>(c));
      if (std::isnan(v)) {
        ++nans;
        EXPECT_TRUE(std::isnan(f.decode(f.encode(v)))) << f.name;
        continue;
      }
      if (std::isinf(v)) continue;  // saturates, below
      EXPECT_EQ(f.encode(v), c) << f.name << " code " << c << " value " << v;
    }
    EXPECT_EQ(nans, f.hasInfinity ? 6 : 2) << f.name;
    EXPECT_EQ(f.decode(f.encode(1e9f)), f.largest) << f.name;
    EXPECT_EQ(f.decode(f.encode(-std::numeric_limits<float>::infinity())), -f.largest) << f.name;
  }
}

// Halfway between two neighbours rounds to the one with an even mantissa;
// a little either side, to the nearer.
TEST(Fp8, RoundsToNearestEven) {
  for (const Fp8Format& f : kFp8) {
    for (int c = 0; c < 0x7f; ++c) {
      const float a = f.decode(static_cast<uint8_t>(c)), b = f.decode(static_cast<uint8_t>(c + 1));
      if (!std::isfinite(a) || !std::isfinite(b)) continue;
      const float mid = (a + b) / 2;  // exact in float32
      const uint8_t even = (c % 2 == 0) ? static_cast<uint8_t>(c) : static_cast<uint8_t>(c + 1);
      EXPECT_EQ(f.encode(mid), even) << f.name << " between codes " << c << " and " << c + 1;
      EXPECT_EQ(f.encode(std::nextafter(mid, a)), c) << f.name;
      EXPECT_EQ(f.encode(std::nextafter(mid, b)), c + 1) << f.name;
      EXPECT_EQ(f.encode(-mid), 0x80 | even) << f.name;
    }
  }
}

// Sums compute in float32 and round once.
TEST(Fp8, ReductionsRoundTheFloatResult) {
  for (fwDataType_t type : {fwFloat8e4m3, fwFloat8e5m2}) {
    const Fp8Format& f = kFp8[type == fwFloat8e4m3 ? 0 : 1];
    std::vector<uint8_t> a(256), b(256), out(256);
    for (int i = 0; i < 256; ++i) {
      a[i] = static_cast<uint8_t>(i);
      b[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
    }
    for (fwRedOp_t op : {fwSum, fwProd, fwMax, fwMin}) {
      Reducer(type, op, 2).combine(out.data(), a.data(), b.data(), 256);
      for (int i = 0; i < 256; ++i) {
        const float x = f.decode(a[i]), y = f.decode(b[i]);
        const float r = op == fwSum ? x + y : op == fwProd ? x * y : op == fwMax ? std::max(x, y) : std::min(x, y);
        if (std::isnan(x) || std::isnan(y)) continue;  // max and min of NaN follow std::max's order
        const float want = f.decode(f.encode(r));
        const float got = f.decode(out[i]);
        EXPECT_TRUE(got == want || (std::isnan(got) && std::isnan(want)))
            << datatypeName(type) << " " << opName(op) << " of " << x << " and " << y << ": " << got;
      }
    }
  }
}

}  // namespace
}  // namespace fairway
