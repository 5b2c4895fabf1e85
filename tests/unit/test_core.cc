// Pure logic: datatypes, reductions, configuration, algorithm selection.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/config_parse.h"
#include "core/copy_kernels.h"
#include "core/datatype.h"
#include "core/reduce_kernels.h"
#include "core/reducer.h"
#include "selection/selector.h"
#include "transports/ucx/ucx_version.h"

#include <cstring>

namespace fairway {
namespace {

TEST(Half, RoundTripsEveryFiniteValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    uint16_t h = static_cast<uint16_t>(bits);
    if ((h & 0x7c00) == 0x7c00) continue;  // inf, nan
    EXPECT_EQ(floatToHalf(halfToFloat(h)), h) << std::hex << bits;
  }
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(halfToFloat(floatToHalf(2049.0f)), 2048.0f);   // tie: to even
  EXPECT_EQ(halfToFloat(floatToHalf(2051.0f)), 2052.0f);   // tie: to even
  EXPECT_EQ(halfToFloat(floatToHalf(2050.5f)), 2050.0f);
  EXPECT_TRUE(std::isinf(halfToFloat(floatToHalf(70000.0f))));
  EXPECT_EQ(halfToFloat(floatToHalf(5.9604645e-08f)), 5.9604645e-08f);  // smallest subnormal
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(NAN))));
}

TEST(Bfloat16, RoundsToNearestEven) {
  EXPECT_EQ(bfloat16ToFloat(floatToBfloat16(1.0f)), 1.0f);
  EXPECT_EQ(bfloat16ToFloat(floatToBfloat16(257.0f)), 256.0f);  // tie: to even
  EXPECT_EQ(bfloat16ToFloat(floatToBfloat16(259.0f)), 260.0f);
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(floatToBfloat16(NAN))));
}

TEST(Datatype, BitwiseOpsOnlyOnIntegers) {
  EXPECT_TRUE(isOpDefinedFor(fwBxor, fwUint8));
  EXPECT_FALSE(isOpDefinedFor(fwBand, fwFloat32));
  EXPECT_FALSE(isOpDefinedFor(fwBor, fwBfloat16));
  EXPECT_TRUE(isOpDefinedFor(fwAvg, fwFloat16));
  EXPECT_EQ(datatypeSize(fwBfloat16), 2u);
  EXPECT_FALSE(isValidDatatype(fwNumTypes));
}

// Links are finite: strtod's "inf" and "nan" are refused, naming the variable.
TEST(Config, LinkVariablesTakeFiniteNumbersOnly) {
  for (const char* text : {"1,inf", "inf,5", "nan,5", "1,nan", "-1,5", "1,0", "1,5x", ""}) {
    auto lookup = [&](const char* name) -> const char* {
      return std::string(name) == "FAIRWAY_INTER_LINK" ? text : nullptr;
    };
    Config c;
    Status st = Config::fromVariables(lookup, &c);
    if (*text == '\0') {
      EXPECT_TRUE(st.isOk()) << st.message();  // empty means unset
      continue;
    }
    EXPECT_EQ(st.code(), fwInvalidArgument) << text;
    EXPECT_NE(st.message().find("FAIRWAY_INTER_LINK"), std::string::npos) << st.message();
  }
  auto valid = [](const char* name) -> const char* {
    return std::string(name) == "FAIRWAY_INTER_LINK" ? "14,0.12" : nullptr;
  };
  Config c;
  ASSERT_TRUE(Config::fromVariables(valid, &c).isOk());
  EXPECT_DOUBLE_EQ(c.interLink.gbPerSec, 0.12);
}

TEST(Config, DeviceRuntimeIsOneOfThree) {
  for (const char* text : {"cuda", "none", "host-emulated", "emulated", "CUDA"}) {
    auto lookup = [&](const char* name) -> const char* {
      return std::string(name) == "FAIRWAY_DEVICE_RUNTIME" ? text : nullptr;
    };
    Config c;
    Status st = Config::fromVariables(lookup, &c);
    const bool valid = std::string(text) == "cuda" || std::string(text) == "none" || std::string(text) == "host-emulated";
    EXPECT_EQ(st.isOk(), valid) << text;
    if (valid) {
      EXPECT_EQ(c.deviceRuntime, text);
    } else {
      EXPECT_NE(st.message().find("FAIRWAY_DEVICE_RUNTIME=" + std::string(text)), std::string::npos);
    }
  }
}

TEST(Config, StreamWaitIsAutoOrHostFunction) {
  for (const char* text : {"auto", "host-function", "memop", ""}) {
    auto lookup = [&](const char* name) -> const char* {
      return std::string(name) == "FAIRWAY_STREAM_WAIT" ? text : nullptr;
    };
    Config c;
    Status st = Config::fromVariables(lookup, &c);
    const std::string value = text;
    if (value == "memop") {
      EXPECT_EQ(st.code(), fwInvalidArgument);
      EXPECT_NE(st.message().find("FAIRWAY_STREAM_WAIT=memop"), std::string::npos) << st.message();
    } else {
      ASSERT_TRUE(st.isOk()) << st.message();
      EXPECT_EQ(c.streamWait, value.empty() ? "auto" : value);
    }
  }
}

TEST(UcxVersion, SameMajorAndMinorOnly) {
  UcxVersion built{1, 13, 0, "/usr/lib/x86_64-linux-gnu"};
  EXPECT_TRUE(checkUcxVersion(built, UcxVersion{1, 13, 1, "/usr/lib/x86_64-linux-gnu/libucp.so.0"}).isOk());
  Status st = checkUcxVersion(built, UcxVersion{1, 22, 0, "/opt/ucx/lib/libucp.so.0"});
  EXPECT_EQ(st.code(), fwSystemError);
  for (const char* part : {"UCX 1.22.0 (/opt/ucx/lib/libucp.so.0)", "built against UCX 1.13 (/usr/lib/x86_64-linux-gnu)"}) {
    EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
  }
  EXPECT_FALSE(checkUcxVersion(built, UcxVersion{2, 13, 0, "x"}).isOk());
}

TEST(Reducer, IntegerOpsAndAverage) {
  std::vector<int32_t> a = {1, -5, 7, 100}, b = {3, 2, -7, 28}, out(4);
  Reducer(fwInt32, fwSum, 2).combine(out.data(), a.data(), b.data(), 4);
  EXPECT_EQ(out, (std::vector<int32_t>{4, -3, 0, 128}));
  Reducer(fwInt32, fwMax, 2).combine(out.data(), a.data(), b.data(), 4);
  EXPECT_EQ(out, (std::vector<int32_t>{3, 2, 7, 100}));
  Reducer(fwInt32, fwBxor, 2).combine(out.data(), a.data(), b.data(), 4);
  EXPECT_EQ(out[0], 1 ^ 3);
  Reducer avg(fwInt32, fwAvg, 2);
  avg.combine(out.data(), a.data(), b.data(), 4);
  avg.finalize(out.data(), 4);
  EXPECT_EQ(out, (std::vector<int32_t>{2, -1, 0, 64}));
}

// avg over more ranks than an 8-bit type holds: the rank count is the
// divisor, not its wrapped value (int8: 200 would be -56; uint8: 256 is 0).
TEST(Reducer, AverageOfEightBitTypesOverManyRanks) {
  std::vector<int8_t> s8 = {-100, 100, 127};
  Reducer(fwInt8, fwAvg, 200).finalize(s8.data(), 3);
  EXPECT_EQ(s8, (std::vector<int8_t>{0, 0, 0}));
  std::vector<int8_t> small = {-100, 100, 7};
  Reducer(fwInt8, fwAvg, 3).finalize(small.data(), 3);
  EXPECT_EQ(small, (std::vector<int8_t>{-33, 33, 2}));
  std::vector<uint8_t> u8 = {255, 10};
  Reducer(fwUint8, fwAvg, 256).finalize(u8.data(), 2);
  EXPECT_EQ(u8, (std::vector<uint8_t>{0, 0}));
  Reducer(fwUint8, fwAvg, 1000).finalize(u8.data(), 2);
  EXPECT_EQ(u8, (std::vector<uint8_t>{0, 0}));
  std::vector<uint8_t> u8b = {255, 130};
  Reducer(fwUint8, fwAvg, 128).finalize(u8b.data(), 2);
  EXPECT_EQ(u8b, (std::vector<uint8_t>{1, 1}));
}

TEST(Reducer, Int8WrapsLikeTheType) {
  std::vector<int8_t> a = {100}, b = {100}, out(1);
  Reducer(fwInt8, fwSum, 2).combine(out.data(), a.data(), b.data(), 1);
  EXPECT_EQ(out[0], static_cast<int8_t>(200));
}

// Integer sums and products wrap as two's complement, as NCCL defines them,
// in both kernel sets; the sanitizer build checks no signed overflow is
// behind the result.
TEST(Reducer, SignedSumAndProductWrapAtTheEdges) {
  for (bool wide : {false, true}) {
    if (wide && !kernels::avx2Usable()) continue;
    auto combine = [&](fwDataType_t type, fwRedOp_t op, void* out, const void* a, const void* b, size_t n) {
      kernels::Kernels k = wide ? kernels::avx2::kernelsFor(type, op) : kernels::baseline::kernelsFor(type, op);
      k.combine(out, a, b, n);
    };
    std::vector<int32_t> a32 = {INT32_MAX, INT32_MIN, INT32_MAX, -1, 65536}, b32 = {1, -1, INT32_MAX, INT32_MIN, 65536};
    std::vector<int32_t> out32(5);
    combine(fwInt32, fwSum, out32.data(), a32.data(), b32.data(), 5);
    EXPECT_EQ(out32, (std::vector<int32_t>{INT32_MIN, INT32_MAX, -2, INT32_MAX, 131072}));
    combine(fwInt32, fwProd, out32.data(), a32.data(), b32.data(), 5);
    EXPECT_EQ(out32, (std::vector<int32_t>{INT32_MAX, INT32_MIN, 1, INT32_MIN, 0}));
    std::vector<int64_t> a64 = {INT64_MAX, INT64_MIN, INT64_MAX}, b64 = {1, -1, 2}, out64(3);
    combine(fwInt64, fwSum, out64.data(), a64.data(), b64.data(), 3);
    EXPECT_EQ(out64, (std::vector<int64_t>{INT64_MIN, INT64_MAX, INT64_MIN + 1}));
    combine(fwInt64, fwProd, out64.data(), a64.data(), b64.data(), 3);
    EXPECT_EQ(out64, (std::vector<int64_t>{INT64_MAX, INT64_MIN, -2}));
    std::vector<int8_t> a8 = {127, -128, -128}, b8 = {1, -1, -128}, out8(3);
    combine(fwInt8, fwProd, out8.data(), a8.data(), b8.data(), 3);
    EXPECT_EQ(out8, (std::vector<int8_t>{127, -128, 0}));
    std::vector<uint64_t> au = {UINT64_MAX}, bu = {2}, outu(1);
    combine(fwUint64, fwSum, outu.data(), au.data(), bu.data(), 1);
    EXPECT_EQ(outu[0], 1u);
  }
}

TEST(Reducer, HalfAccumulatesInFloat) {
  std::vector<uint16_t> a = {floatToHalf(1.5f), floatToHalf(-2.0f)}, b = {floatToHalf(2.25f), floatToHalf(8.0f)};
  std::vector<uint16_t> out(2);
  Reducer(fwFloat16, fwProd, 2).combine(out.data(), a.data(), b.data(), 2);
  EXPECT_EQ(halfToFloat(out[0]), 3.375f);
  EXPECT_EQ(halfToFloat(out[1]), -16.0f);
  Reducer avg(fwBfloat16, fwAvg, 4);
  std::vector<uint16_t> x = {floatToBfloat16(6.0f)}, y = {floatToBfloat16(2.0f)}, z(1);
  avg.combine(z.data(), x.data(), y.data(), 1);
  avg.finalize(z.data(), 1);
  EXPECT_EQ(bfloat16ToFloat(z[0]), 2.0f);
}

TEST(Reducer, InPlaceAliasing) {
  std::vector<double> a = {1, 2, 3}, b = {10, 20, 30};
  Reducer(fwFloat64, fwSum, 2).combine(a.data(), a.data(), b.data(), 3);
  EXPECT_EQ(a, (std::vector<double>{11, 22, 33}));
}

class ConfigEnv : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* v : {"FAIRWAY_TIMEOUT_MS", "FAIRWAY_TRANSPORT", "FAIRWAY_ALGO", "FAIRWAY_SEGMENT_BYTES",
                          "FAIRWAY_PIPELINE_DEPTH", "FAIRWAY_SLICE_BYTES", "FAIRWAY_COMPRESS",
                          "FAIRWAY_SHM_CHUNK_BYTES", "FAIRWAY_SHM_SINGLE_COPY_BYTES"}) {
      unsetenv(v);
    }
  }
};

TEST_F(ConfigEnv, DefaultsAndOverrides) {
  Config c;
  ASSERT_TRUE(Config::fromEnvironment(&c).isOk());
  EXPECT_EQ(c.timeoutMs, 300000);
  setenv("FAIRWAY_TIMEOUT_MS", "1500", 1);
  setenv("FAIRWAY_ALGO", " allreduce : ring ; allgather:bruck ", 1);
  ASSERT_TRUE(Config::fromEnvironment(&c).isOk());
  EXPECT_EQ(c.timeoutMs, 1500);
  ASSERT_EQ(c.algoOverrides.size(), 2u);
  EXPECT_EQ(c.algoOverrides[0].text(), "allreduce:ring");
  EXPECT_EQ(c.algoOverrides[1].text(), "allgather:bruck");
  setenv("FAIRWAY_SLICE_BYTES", "2M", 1);
  setenv("FAIRWAY_SEGMENT_BYTES", "65536", 1);
  ASSERT_TRUE(Config::fromEnvironment(&c).isOk());
  EXPECT_EQ(c.pipeline.sliceBytes, size_t{2} << 20);
  EXPECT_EQ(c.pipeline.segmentBytes, size_t{65536});
}

TEST(AlgoOverrides, SizeAndRankRangesInTheOrderWritten) {
  std::vector<AlgoOverride> items;
  ASSERT_TRUE(parseAlgoOverrides("allreduce:0-64K:recursive_doubling, allreduce:64K-:ranks=2-8:ring;"
                                 "broadcast:ranks=4:binomial,allgather:-1M:ranks=3-:bruck",
                                 &items)
                  .isOk());
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[0].fromBytes, 0u);
  EXPECT_EQ(items[0].toBytes, 64u * 1024);
  EXPECT_EQ(items[0].algorithm, "recursive_doubling");
  EXPECT_EQ(items[1].fromBytes, 64u * 1024);
  EXPECT_EQ(items[1].toBytes, ~size_t{0});
  EXPECT_EQ(items[1].minRanks, 2);
  EXPECT_EQ(items[1].maxRanks, 8);
  EXPECT_EQ(items[2].minRanks, 4);
  EXPECT_EQ(items[2].maxRanks, 4);
  EXPECT_EQ(items[3].toBytes, size_t{1} << 20);
  EXPECT_EQ(items[3].minRanks, 3);
  EXPECT_EQ(items[3].maxRanks, std::numeric_limits<int>::max());
  // Written back as it is read.
  EXPECT_EQ(items[0].text(), "allreduce:0-64K:recursive_doubling");
  EXPECT_EQ(items[1].text(), "allreduce:64K-:ranks=2-8:ring");
  EXPECT_EQ(items[2].text(), "broadcast:ranks=4-4:binomial");
  EXPECT_EQ(items[3].text(), "allgather:0-1M:ranks=3-:bruck");
  std::vector<AlgoOverride> again;
  for (const AlgoOverride& o : items) {
    ASSERT_TRUE(parseAlgoOverrides(o.text().c_str(), &again).isOk()) << o.text();
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(again[0].text(), o.text());
  }
}

TEST(AlgoOverrides, MalformedItemsAreRefusedByName) {
  for (const char* bad : {"allreduce", "allreduce:", ":ring", "allreduce:64K-0:ring", "allreduce:1M:ring",
                          "allreduce:0-1K:0-2K:ring", "allreduce:ranks=0-2:ring", "allreduce:ranks=8-2:ring",
                          "allreduce:ranks=2:ranks=4:ring", "allreduce:0-1Q:ring", "allreduce:a:b:c:d:ring"}) {
    std::vector<AlgoOverride> items;
    const Status st = parseAlgoOverrides(bad, &items);
    EXPECT_EQ(st.code(), fwInvalidArgument) << bad;
    EXPECT_NE(st.message().find(std::string("FAIRWAY_ALGO=") + bad), std::string::npos) << st.message();
    EXPECT_TRUE(items.empty()) << bad;
  }
}

TEST_F(ConfigEnv, SharedMemoryChunk) {
  Config c;
  ASSERT_TRUE(Config::fromEnvironment(&c).isOk());
  EXPECT_EQ(c.shmChunkBytes, size_t{256} << 10);
  EXPECT_FALSE(c.shmChunkBytesSet);  // the node's leader picks it (SharedMemoryNode::defaultChunkBytes)
  EXPECT_FALSE(c.shmSingleCopySet);  // the node picks (SharedMemoryNode::default*SingleCopy)
  setenv("FAIRWAY_SHM_SINGLE_COPY_BYTES", "4M", 1);
  setenv("FAIRWAY_SHM_CHUNK_BYTES", "1M", 1);
  ASSERT_TRUE(Config::fromEnvironment(&c).isOk());
  EXPECT_EQ(c.shmChunkBytes, size_t{1} << 20);
  EXPECT_TRUE(c.shmChunkBytesSet);
  EXPECT_TRUE(c.shmSingleCopySet);
  EXPECT_EQ(c.shmSingleCopyMin, size_t{4} << 20);
  EXPECT_EQ(c.shmSingleCopyMax, kNoUpperEnd);
  setenv("FAIRWAY_SHM_SINGLE_COPY_BYTES", "64K-8M", 1);
  ASSERT_TRUE(Config::fromEnvironment(&c).isOk());
  EXPECT_EQ(c.shmSingleCopyMin, size_t{64} << 10);
  EXPECT_EQ(c.shmSingleCopyMax, size_t{8} << 20);
  setenv("FAIRWAY_SHM_SINGLE_COPY_BYTES", "0", 1);
  ASSERT_TRUE(Config::fromEnvironment(&c).isOk());
  EXPECT_TRUE(c.shmSingleCopySet);
  EXPECT_EQ(c.shmSingleCopyMin, 0u);  // never
  for (const char* bad : {"8M-64K", "64K-", "lots", "64K-8Q"}) {
    setenv("FAIRWAY_SHM_SINGLE_COPY_BYTES", bad, 1);
    Status st = Config::fromEnvironment(&c);
    EXPECT_EQ(st.code(), fwInvalidArgument) << bad;
    EXPECT_NE(st.message().find("FAIRWAY_SHM_SINGLE_COPY_BYTES"), std::string::npos) << st.message();
  }
  setenv("FAIRWAY_SHM_SINGLE_COPY_BYTES", "auto", 1);
  setenv("FAIRWAY_SHM_CHUNK_BYTES", "1M", 1);
  setenv("FAIRWAY_SHM_CHUNK_BYTES", "5000", 1);  // whole cache lines
  ASSERT_TRUE(Config::fromEnvironment(&c).isOk());
  EXPECT_EQ(c.shmChunkBytes, size_t{4992});
  setenv("FAIRWAY_SHM_CHUNK_BYTES", "auto", 1);  // the leader's pick again
  ASSERT_TRUE(Config::fromEnvironment(&c).isOk());
  EXPECT_FALSE(c.shmChunkBytesSet);
  EXPECT_EQ(c.shmChunkBytes, size_t{256} << 10);
  for (const char* bad : {"1K", "65M", "lots"}) {
    setenv("FAIRWAY_SHM_CHUNK_BYTES", bad, 1);
    const Status st = Config::fromEnvironment(&c);
    EXPECT_EQ(st.code(), fwInvalidArgument) << bad;
    EXPECT_NE(st.message().find("FAIRWAY_SHM_CHUNK_BYTES"), std::string::npos) << st.message();
  }
}

TEST_F(ConfigEnv, CompressionRules) {
  Config c;
  setenv("FAIRWAY_COMPRESS", "allreduce:int4/128:1M; reducescatter:int8 ;allgather:bf16:64K", 1);
  ASSERT_TRUE(Config::fromEnvironment(&c).isOk()) << Config::fromEnvironment(&c).message();
  ASSERT_EQ(c.compressionRules.size(), 3u);
  EXPECT_EQ(c.compressionRules.at("allreduce").compression.kind, fwCompressInt4);
  EXPECT_EQ(c.compressionRules.at("allreduce").compression.blockSize, 128);
  EXPECT_EQ(c.compressionRules.at("allreduce").minBytes, size_t{1} << 20);
  EXPECT_EQ(c.compressionRules.at("reducescatter").compression.blockSize, 256);
  EXPECT_EQ(c.compressionRules.at("reducescatter").minBytes, 0u);
  EXPECT_EQ(c.compressionRules.at("allgather").compression.kind, fwCompressBf16);
  for (const char* bad : {"allreduce", "broadcast:fp16", "allreduce:int9", "allgather:int8", "allreduce:int8/100",
                          "allreduce:fp16/256", "allreduce:int8:lots", "allreduce:int8:1M:2"}) {
    setenv("FAIRWAY_COMPRESS", bad, 1);
    const Status st = Config::fromEnvironment(&c);
    EXPECT_EQ(st.code(), fwInvalidArgument) << bad;
    EXPECT_NE(st.message().find("FAIRWAY_COMPRESS"), std::string::npos) << st.message();
  }
}

TEST_F(ConfigEnv, InvalidValuesNameTheVariable) {
  Config c;
  setenv("FAIRWAY_TIMEOUT_MS", "-4", 1);
  Status st = Config::fromEnvironment(&c);
  EXPECT_EQ(st.code(), fwInvalidArgument);
  EXPECT_NE(st.message().find("FAIRWAY_TIMEOUT_MS=-4"), std::string::npos);
  unsetenv("FAIRWAY_TIMEOUT_MS");
  setenv("FAIRWAY_TRANSPORT", "carrier-pigeon", 1);
  EXPECT_NE(Config::fromEnvironment(&c).message().find("FAIRWAY_TRANSPORT"), std::string::npos);
  unsetenv("FAIRWAY_TRANSPORT");
  setenv("FAIRWAY_ALGO", "allreduce", 1);
  EXPECT_NE(Config::fromEnvironment(&c).message().find("collective[:FROM-TO][:ranks=LO-HI]:algorithm"), std::string::npos);
  setenv("FAIRWAY_ALGO", "", 1);
  setenv("FAIRWAY_SEGMENT_BYTES", "12x", 1);
  EXPECT_NE(Config::fromEnvironment(&c).message().find("FAIRWAY_SEGMENT_BYTES"), std::string::npos);
  for (const char* bad : {"2T", "-1M", "M", "1KB", "99999999999999G"}) {
    setenv("FAIRWAY_SEGMENT_BYTES", bad, 1);
    EXPECT_EQ(Config::fromEnvironment(&c).code(), fwInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace fairway

namespace fairway {
namespace {

// Both instruction-set builds must give identical bits: the CPU decides
// which one runs, and ranks on different CPUs must agree.
TEST(ReduceKernels, BaselineAndAvx2Agree) {
  if (!kernels::avx2Usable()) GTEST_SKIP() << "CPU lacks AVX2/F16C";
  const size_t n = 1000;  // not a multiple of any vector width
  std::vector<uint8_t> a(n * 8), b(n * 8), x(n * 8), y(n * 8);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<uint8_t>(i * 37 + 11);
    b[i] = static_cast<uint8_t>(i * 91 + 5);
  }
  for (int t = 0; t < fwNumTypes; ++t) {
    auto type = static_cast<fwDataType_t>(t);
    if (type == fwFloat16) {  // keep halves finite and not NaN: clear the top exponent bit
      for (size_t i = 1; i < a.size(); i += 2) { a[i] &= 0xbf; b[i] &= 0xbf; }
    }
    for (int o = 0; o < fwNumOps; ++o) {
      auto op = static_cast<fwRedOp_t>(o);
      if (!isOpDefinedFor(op, type)) continue;
      kernels::Kernels base = kernels::baseline::kernelsFor(type, op);
      kernels::Kernels wide = kernels::avx2::kernelsFor(type, op);
      base.combine(x.data(), a.data(), b.data(), n);
      wide.combine(y.data(), a.data(), b.data(), n);
      base.divide(x.data(), n, 3);
      wide.divide(y.data(), n, 3);
      size_t bytes = n * datatypeSize(type);
      EXPECT_EQ(std::memcmp(x.data(), y.data(), bytes), 0) << datatypeName(type) << " " << opName(op);
    }
  }
}

// The 16-bit float loops of the avx2 set (sixteen or eight lanes at a
// time, then the scalar tail) against the scalar arithmetic and rounding,
// value by value: rounding ties both ways, the largest finite values
// overflowing to infinity, infinities, NaNs (quiet and signalling, either
// sign, in either input), signed zeros and subnormals, at every position
// of a vector and in the tail.
TEST(ReduceKernels, SixteenBitFloatLanesRoundAsTheScalarPath) {
  if (!kernels::avx2Usable()) GTEST_SKIP() << "CPU lacks AVX2/F16C";
  const std::vector<uint16_t> bf16Edges = {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x0080, 0x3f80, 0x3f81, 0xbf81,
                                           0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81, 0xff81, 0x4049,
                                           0x3c01, 0x3b80, 0x4000, 0xc000, 0x7fff, 0x0100};
  const std::vector<uint16_t> halfEdges = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0x3c01, 0xbc01,
                                           0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x4248, 0x1400, 0x1401, 0x3555, 0x0200};
  for (fwDataType_t type : {fwBfloat16, fwFloat16}) {
    const std::vector<uint16_t>& edges = type == fwBfloat16 ? bf16Edges : halfEdges;
    // Every pair of edge values, 35 elements a call: two vectors and a tail.
    std::vector<uint16_t> a, b;
    for (uint16_t x : edges) {
      for (uint16_t y : edges) {
        a.push_back(x);
        b.push_back(y);
      }
    }
    for (fwRedOp_t op : {fwSum, fwProd, fwMax, fwMin}) {
      kernels::Kernels wide = kernels::avx2::kernelsFor(type, op);
      kernels::Kernels scalar = kernels::baseline::kernelsFor(type, op);
      for (size_t at = 0; at < a.size(); at += 35) {
        const size_t n = std::min<size_t>(35, a.size() - at);
        std::vector<uint16_t> x(n), y(n);
        wide.combine(x.data(), a.data() + at, b.data() + at, n);
        scalar.combine(y.data(), a.data() + at, b.data() + at, n);
        // Which of two NaNs an operation returns is the compiler's choice
        // of operand order, in either build; that the result is a NaN is not.
        auto isNan = [&](uint16_t v) {
          return type == fwFloat16 ? (v & 0x7c00) == 0x7c00 && (v & 0x3ff) != 0
                                   : (v & 0x7f80) == 0x7f80 && (v & 0x7f) != 0;
        };
        for (size_t i = 0; i < n; ++i) {
          if (isNan(a[at + i]) && isNan(b[at + i])) {
            EXPECT_TRUE(isNan(x[i]) && isNan(y[i]));
          } else {
            EXPECT_EQ(x[i], y[i]) << datatypeName(type) << " " << opName(op) << " of 0x" << std::hex << a[at + i]
                                  << " and 0x" << b[at + i];
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace fairway

namespace fairway {
namespace {

// Every copy loop (both instruction sets, one or two destinations,
// ordinary or streaming stores) copies exactly the bytes asked for, at
// any alignment of source and destinations (two destinations aligned
// alike or not) and any length around the 64-byte lines the loop takes
// whole and the blocks of its two-pass form, and writes nothing outside.
TEST(CopyKernels, EveryLoopCopiesExactlyTheBytesAskedFor) {
  std::vector<std::pair<const char*, kernels::CopyFn>> loops = {{"baseline", kernels::baseline::copyFn()}};
  if (kernels::avx2Usable()) loops.push_back({"avx2", kernels::avx2::copyFn()});
  constexpr size_t kGuard = 64;
  constexpr char kUntouched = 0x5a;
  // Two destinations aligned alike take one pass from 32 KiB, misaligned
  // ones from past 64 KiB.
  const size_t lengths[] = {0,    1,    15,   31,    63,    64,    65,    127,  128,
                            200,  1000, 4095, 4097,  9000,  32767, 32768, 40000, 65536,
                            65537, 70000};
  std::vector<char> src(70000 + 2 * kGuard);
  // No period a block or line size divides: a piece copied from the wrong offset shows.
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>((i * 2654435761u) >> 13);
  // 64-byte aligned storage, so the offsets below are the offsets from a line.
  auto lineAligned = [](std::vector<char>& v) {
    return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
  };
  std::vector<char> aStore(src.size() + 3 * kGuard), bStore(aStore.size());
  for (const auto& [name, copy] : loops) {
    for (size_t length : lengths) {
      for (size_t srcOffset : {0, 17}) {
        for (size_t aOffset : {0, 16, 33}) {
          for (size_t bOffset : {0, 3, 16}) {
            for (bool two : {false, true}) {
              for (bool streaming : {false, true}) {
                std::fill(aStore.begin(), aStore.end(), kUntouched);
                std::fill(bStore.begin(), bStore.end(), kUntouched);
                char* aAt = lineAligned(aStore) + kGuard + aOffset;
                char* bAt = lineAligned(bStore) + kGuard + bOffset;
                copy(two ? aAt : nullptr, bAt, src.data() + srcOffset, length, streaming);
                const std::string what = std::string(name) + " length " + std::to_string(length) + " src+" +
                                         std::to_string(srcOffset) + " a+" + std::to_string(aOffset) + " b+" +
                                         std::to_string(bOffset) + (two ? " two" : " one") +
                                         (streaming ? " streaming" : "");
                auto check = [&](const std::vector<char>& store, const char* at, bool written) {
                  if (written) {
                    ASSERT_EQ(std::memcmp(at, src.data() + srcOffset, length), 0) << what;
                  }
                  for (size_t i = 0; i < store.size(); ++i) {
                    const char* p = store.data() + i;
                    if (written && p >= at && p < at + length) continue;
                    ASSERT_EQ(store[i], kUntouched) << what << ": byte " << i << " outside the copy written";
                  }
                };
                check(bStore, bAt, true);
                check(aStore, aAt, two);
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace fairway
