// Device buffers end to end: a one-rank NCCL communicator, several ranks
// sharing one GPU over UCX, staged and on device memory (NCCL refuses two
// ranks on one GPU, so the plan must fall back), and ranks posing as separate nodes,
// where allreduce, reduce-scatter and allgather run two-phase (NCCL inside
// each node, staged UCX between). Each test skips, saying why, where no
// CUDA device is usable.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/compression.h"
#include "core/datatype.h"
#include "core/quantize_kernels.h"
#include "core/reducer.h"
#include "tests/multirank/rank_harness.h"
#include "tests/multirank/test_device.h"
#include "transports/device_runtime.h"

namespace fairway::testing {
namespace {

// Probed in a child process (test_device.h): CUDA must not be initialised
// in the parent, which forks the ranks afterwards.
#define SKIP_WITHOUT_GPU()                                                                     \
  do {                                                                                         \
    const DeviceProbe& probe_ = probeDevice();                                                 \
    if (!probe_.usable || !probe_.memoryIsCuda || probe_.devices == 0) {                       \
      GTEST_SKIP() << "no usable CUDA device: "                                                \
                   << (probe_.usable ? "FAIRWAY_DEVICE_RUNTIME is not cuda" : probe_.why);     \
    }                                                                                          \
  } while (0)

// Runs allreduce, reducescatter, allgather, broadcast and alltoall on device
// buffers with a stream and checks every element on the host.
int deviceCollectives(const RankContext& ctx, fwComm_t comm, size_t count) {
  int failures = 0;
  const int n = ctx.nranks;
  std::vector<float> host(count * n);
  float* send = nullptr;
  float* recv = nullptr;
  cudaStream_t stream = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&send), count * n * sizeof(float)) != cudaSuccess ||
      cudaMalloc(reinterpret_cast<void**>(&recv), count * n * sizeof(float)) != cudaSuccess || cudaStreamCreate(&stream) != cudaSuccess) {
    reportFailure(ctx, "cuda allocation failed");
    return 1;
  }
  auto upload = [&](auto value) {
    for (size_t i = 0; i < host.size(); ++i) host[i] = value(i);
    cudaMemcpy(send, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
  };
  auto download = [&](size_t elements) {
    cudaStreamSynchronize(stream);
    cudaMemcpy(host.data(), recv, elements * sizeof(float), cudaMemcpyDeviceToHost);
  };
  auto expect = [&](size_t elements, auto value, const char* what) {
    for (size_t i = 0; i < elements; ++i) {
      if (host[i] != value(i)) {
        reportFailure(ctx, std::string(what) + ": element " + std::to_string(i) + " is " + std::to_string(host[i]) +
                               ", expected " + std::to_string(value(i)));
        ++failures;
        return;
      }
    }
  };
  const int r = ctx.rank;
  const float ranksSum = n * (n - 1) / 2.0f;

  upload([&](size_t i) { return static_cast<float>(r + i % 7); });
  RANK_CHECK(ctx, fwAllReduce(send, recv, count, fwFloat32, fwSum, comm, stream) == fwSuccess, "allreduce");
  download(count);
  expect(count, [&](size_t i) { return ranksSum + n * static_cast<float>(i % 7); }, "allreduce");

  // In place: recv holds the input.
  cudaMemcpy(recv, send, count * sizeof(float), cudaMemcpyDeviceToDevice);
  RANK_CHECK(ctx, fwAllReduce(recv, recv, count, fwFloat32, fwSum, comm, stream) == fwSuccess, "in-place allreduce");
  download(count);
  expect(count, [&](size_t i) { return ranksSum + n * static_cast<float>(i % 7); }, "in-place allreduce");

  RANK_CHECK(ctx, fwReduceScatter(send, recv, count, fwFloat32, fwSum, comm, stream) == fwSuccess, "reducescatter");
  download(count);
  expect(count, [&](size_t i) { return ranksSum + n * static_cast<float>((r * count + i) % 7); }, "reducescatter");

  RANK_CHECK(ctx, fwAllGather(send, recv, count, fwFloat32, comm, stream) == fwSuccess, "allgather");
  download(count * n);
  expect(count * n, [&](size_t i) { return static_cast<float>(i / count + (i % count) % 7); }, "allgather");

  RANK_CHECK(ctx, fwBroadcast(send, recv, count, fwFloat32, n - 1, comm, stream) == fwSuccess, "broadcast");
  download(count);
  expect(count, [&](size_t i) { return static_cast<float>(n - 1 + i % 7); }, "broadcast");

  RANK_CHECK(ctx, fwAllToAll(send, recv, count, fwFloat32, comm, stream) == fwSuccess, "alltoall");
  download(count * n);
  // Block b of rank r's result is block r of rank b's input.
  expect(count * n, [&](size_t i) { return static_cast<float>(i / count + (r * count + i % count) % 7); },
         "alltoall");

  // In-place allgather: this rank's block already sits at its place in recv.
  cudaMemcpy(recv + r * count, send, count * sizeof(float), cudaMemcpyDeviceToDevice);
  RANK_CHECK(ctx, fwAllGather(recv + r * count, recv, count, fwFloat32, comm, stream) == fwSuccess,
             "in-place allgather");
  download(count * n);
  expect(count * n, [&](size_t i) { return static_cast<float>(i / count + (i % count) % 7); }, "in-place allgather");

  cudaFree(send);
  cudaFree(recv);
  cudaStreamDestroy(stream);
  return failures;
}

TEST(Gpu, OneRankNcclCommunicator) {
  SKIP_WITHOUT_GPU();
  auto outcomes = runRanks(1, [](const RankContext& ctx) {
    int failures = 0;
    setenv("FAIRWAY_INTRA_TRANSPORT", "nccl", 1);  // fail, not fall back, if NCCL cannot serve it
    cudaSetDevice(0);
    fwComm_t comm = nullptr;
    RANK_CHECK(ctx, fwCommInitRank(&comm, 1, ctx.id, 0) == fwSuccess, "init with NCCL forced");
    if (comm == nullptr) return failures;
    // Several staging slices, and not a multiple of anything.
    failures += deviceCollectives(ctx, comm, (size_t{3} << 20) + 5);
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    return failures;
  });
  EXPECT_EQ(outcomes[0].exitCode, 0);
}

// Through pinned-host staging, and through UCX on the device memory itself
// (cuda_ipc / cuda_copy: needs a CUDA-aware UCX such as the libucx-cu13
// wheel's, which scripts/gpu_check.sh builds against).
void ranksSharingOneGpu(const char* ucxDeviceMemory) {
  auto outcomes = runRanks(3, [ucxDeviceMemory](const RankContext& ctx) {
    int failures = 0;
    setenv("FAIRWAY_UCX_DEVICE_MEMORY", ucxDeviceMemory, 1);
    cudaSetDevice(0);
    fwComm_t comm = nullptr;
    RANK_CHECK(ctx, fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) == fwSuccess, "init");
    if (comm == nullptr) return failures;
    failures += deviceCollectives(ctx, comm, (size_t{3} << 20) + 5);
    // Host buffers with a stream are refused; device buffers in a non-blocking call too.
    float x = 0;
    int fakeStream = 0;
    RANK_CHECK(ctx, fwAllReduce(&x, &x, 1, fwFloat32, fwSum, comm, &fakeStream) == fwInvalidUsage,
               "host buffers with a stream");
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    return failures;
  });
  for (size_t r = 0; r < outcomes.size(); ++r) EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
}

TEST(Gpu, RanksSharingOneGpuUseUcxStaging) {
  SKIP_WITHOUT_GPU();
  ranksSharingOneGpu("staged");
}

TEST(Gpu, RanksSharingOneGpuUseUcxOnDeviceMemory) {
  SKIP_WITHOUT_GPU();
  ranksSharingOneGpu("direct");
}

// Each rank its own node: the node communicators are one NCCL rank each
// (so one GPU serves them all) and the rail phase crosses "nodes" over UCX.
TEST(Gpu, RanksOnSeparateNodesRunTwoPhase) {
  SKIP_WITHOUT_GPU();
  auto outcomes = runRanks(3, [](const RankContext& ctx) {
    int failures = 0;
    setenv("FAIRWAY_NODE_ID", ("gpu-node-" + std::to_string(ctx.rank)).c_str(), 1);
    cudaSetDevice(0);
    fwComm_t comm = nullptr;
    RANK_CHECK(ctx, fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) == fwSuccess, "init");
    if (comm == nullptr) return failures;
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, (size_t{3} << 20) + 5}) {
      failures += deviceCollectives(ctx, comm, count);
    }
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    return failures;
  });
  for (size_t r = 0; r < outcomes.size(); ++r) EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
}

// The CUDA plugin's runtime, loaded as the core loads it (null if it cannot be).
std::unique_ptr<DeviceRuntime> loadCudaRuntime() {
  void* plugin = dlopen(FAIRWAY_CUDA_DEVICE_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  auto entry = plugin ? reinterpret_cast<FairwayDeviceRuntimeEntry>(dlsym(plugin, FAIRWAY_DEVICE_RUNTIME_SYMBOL))
                      : nullptr;
  std::unique_ptr<DeviceRuntime> device;
  if (entry == nullptr || !entry()->create(&device).isOk()) return nullptr;
  return device;
}

// The first element where two results differ, or count: bit for bit,
// except that any NaN equals any NaN (a GPU's arithmetic returns its one
// canonical NaN where the CPU passes the operand's payload on).
size_t firstDifference(fwDataType_t type, const uint8_t* got, const uint8_t* expected, size_t count) {
  const size_t es = datatypeSize(type);
  auto isNan = [type](const uint8_t* p) {
    switch (type) {
      case fwFloat16: { uint16_t h; std::memcpy(&h, p, 2); return std::isnan(halfToFloat(h)); }
      case fwBfloat16: { uint16_t h; std::memcpy(&h, p, 2); return std::isnan(bfloat16ToFloat(h)); }
      case fwFloat32: { float f; std::memcpy(&f, p, 4); return std::isnan(f); }
      case fwFloat64: { double d; std::memcpy(&d, p, 8); return std::isnan(d); }
      case fwFloat8e4m3: return std::isnan(float8e4m3ToFloat(*p));
      case fwFloat8e5m2: return std::isnan(float8e5m2ToFloat(*p));
      default: return false;
    }
  };
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* g = got + i * es;
    const uint8_t* e = expected + i * es;
    if (std::memcmp(g, e, es) != 0 && !(isNan(g) && isNan(e))) return i;
  }
  return count;
}

// The CUDA plugin's reduction kernels, which algorithms use on device
// memory that UCX reaches, against the host's loops, bit for bit but for
// NaN payloads: every type and op, random bits (so NaN, infinities and
// overflow included), and
// avg's division by divisors an 8-bit type cannot hold.
TEST(Gpu, DeviceReductionsMatchTheHostLoops) {
  SKIP_WITHOUT_GPU();
  auto outcomes = runRanks(1, [](const RankContext& ctx) {
    int failures = 0;
    std::unique_ptr<DeviceRuntime> device = loadCudaRuntime();
    RANK_CHECK(ctx, device != nullptr, "loading the CUDA runtime plugin");
    if (!device) return failures;
    constexpr size_t kCount = 100003;
    std::mt19937_64 random(42);
    const fwDataType_t types[] = {fwInt8,    fwUint8,    fwInt32,   fwUint32,  fwInt64,      fwUint64,
                                  fwFloat16, fwBfloat16, fwFloat32, fwFloat64, fwFloat8e4m3, fwFloat8e5m2};
    const fwRedOp_t ops[] = {fwSum, fwProd, fwMax, fwMin, fwAvg, fwBand, fwBor, fwBxor};
    void* stream = nullptr;
    RANK_CHECK(ctx, device->createStream(&stream).isOk(), "stream");
    for (fwDataType_t type : types) {
      const size_t bytes = kCount * datatypeSize(type);
      std::vector<uint8_t> a(bytes), b(bytes), expected(bytes), got(bytes);
      for (auto* v : {&a, &b}) for (auto& x : *v) x = static_cast<uint8_t>(random());
      void *da = nullptr, *db = nullptr;
      RANK_CHECK(ctx, device->allocateDevice(bytes, &da).isOk() && device->allocateDevice(bytes, &db).isOk(),
                 "device memory");
      for (fwRedOp_t op : ops) {
        if (!isOpDefinedFor(op, type)) continue;
        for (int divisor : {1, 3, 200, 256}) {
          if (divisor != 1 && op != fwAvg) continue;
          Reducer reducer(type, op, divisor);
          reducer.combine(expected.data(), a.data(), b.data(), kCount);
          reducer.finalize(expected.data(), kCount);
          bool ok = device->copyAsync(da, a.data(), bytes, stream).isOk() &&
                    device->copyAsync(db, b.data(), bytes, stream).isOk() &&
                    device->combineAsync(da, da, db, kCount, type, op, stream).isOk() &&
                    (op != fwAvg || device->divideAsync(da, kCount, type, divisor, stream).isOk()) &&
                    device->copyAsync(got.data(), da, bytes, stream).isOk() &&
                    device->synchronize(stream, 60000).isOk();
          RANK_CHECK(ctx, ok, std::string("device reduction of ") + datatypeName(type));
          const size_t differs = ok ? firstDifference(type, got.data(), expected.data(), kCount) : kCount;
          if (ok && differs < kCount) {
            reportFailure(ctx, std::string(datatypeName(type)) + " op " + std::to_string(op) + " divisor " +
                                   std::to_string(divisor) + ": element " + std::to_string(differs) + " differs");
            ++failures;
          }
        }
      }
      device->freeDevice(da);
      device->freeDevice(db);
    }
    device->destroyStream(stream);
    return failures;
  });
  EXPECT_EQ(outcomes[0].exitCode, 0);
}

// The CUDA plugin's compression kernels against the host's, bit for bit
// (NaN payloads aside): every step, wire format and value type, with a
// residual, and blocks holding Inf and NaN. Then their speed at 256 MiB of
// float32 against a device-to-device copy of the same bytes (printed; the
// mark is 85% of the copy's bandwidth).
TEST(Gpu, CompressionKernelsMatchTheHost) {
  SKIP_WITHOUT_GPU();
  auto outcomes = runRanks(1, [](const RankContext& ctx) {
    int failures = 0;
    std::unique_ptr<DeviceRuntime> device = loadCudaRuntime();
    RANK_CHECK(ctx, device != nullptr, "loading the CUDA runtime plugin");
    if (!device) return failures;
    void* stream = nullptr;
    RANK_CHECK(ctx, device->createStream(&stream).isOk(), "stream");
    constexpr size_t kCount = 100003;
    std::mt19937 random(7);
    std::normal_distribution<float> gaussian(0.f, 3.f);
    std::vector<float> values(kCount), residual(kCount);
    for (size_t i = 0; i < kCount; ++i) values[i] = gaussian(random), residual[i] = 0.01f * gaussian(random);
    values[1000] = INFINITY;
    values[5000] = NAN;
    auto onDevice = [&](size_t bytes, const void* from) {
      void* p = nullptr;
      if (!device->allocateDevice(bytes, &p).isOk()) return static_cast<void*>(nullptr);
      if (from != nullptr && !device->copyAsync(p, from, bytes, stream).isOk()) return static_cast<void*>(nullptr);
      return p;
    };
    auto back = [&](void* p, size_t bytes) {
      std::vector<uint8_t> out(bytes);
      RANK_CHECK(ctx, device->copyAsync(out.data(), p, bytes, stream).isOk() && device->synchronize(stream, 60000).isOk(),
                 "copy back");
      return out;
    };
    for (fwDataType_t type : {fwFloat32, fwFloat16, fwBfloat16}) {
      std::vector<uint8_t> input(kCount * datatypeSize(type));
      kernels::fromFloatFor(type)(values.data(), kCount, input.data());
      for (fwCompressKind_t kind : {fwCompressFp16, fwCompressBf16, fwCompressInt8, fwCompressInt4}) {
        Compression c;
        c.kind = kind;
        c.blockSize = 128;
        const size_t wireBytes = c.encodedBytes(kCount);
        std::vector<uint8_t> wire(wireBytes), decoded(input.size());
        std::vector<float> hostResidual = residual, acc(kCount, 1.f);
        kernels::CodecStep encode;
        encode.op = kernels::CodecStep::Op::Encode;
        encode.format = kind;
        encode.blockSize = 128;
        encode.valueType = type;
        encode.count = kCount;
        encode.lost = kernels::Lost{nullptr, 2.f, true};
        kernels::CodecStep decodeAdd = encode, decode = encode;
        decodeAdd.op = kernels::CodecStep::Op::DecodeAdd;
        decode.op = kernels::CodecStep::Op::Decode;
        // Host.
        encode.src = input.data(), encode.dst = wire.data(), encode.add = hostResidual.data();
        encode.lost.at = hostResidual.data();
        decodeAdd.src = wire.data(), decodeAdd.dst = acc.data();
        decode.src = wire.data(), decode.dst = decoded.data();
        RANK_CHECK(ctx, kernels::runOnCpu(encode) && kernels::runOnCpu(decodeAdd) && kernels::runOnCpu(decode),
                   "host kernels");
        // Device.
        void* dIn = onDevice(input.size(), input.data());
        void* dWire = onDevice(wireBytes, nullptr);
        void* dResidual = onDevice(kCount * 4, residual.data());
        std::vector<float> ones(kCount, 1.f);
        void* dAcc = onDevice(kCount * 4, ones.data());
        void* dDecoded = onDevice(input.size(), nullptr);
        RANK_CHECK(ctx, dIn && dWire && dResidual && dAcc && dDecoded, "device memory");
        encode.src = dIn, encode.dst = dWire, encode.add = static_cast<float*>(dResidual);
        encode.lost.at = static_cast<float*>(dResidual);
        decodeAdd.src = dWire, decodeAdd.dst = dAcc;
        decode.src = dWire, decode.dst = dDecoded;
        RANK_CHECK(ctx, device->codecAsync(encode, stream).isOk() && device->codecAsync(decodeAdd, stream).isOk() &&
                            device->codecAsync(decode, stream).isOk(), "device kernels");
        const std::string what = std::string(compressionName(kind)) + " of " + datatypeName(type);
        RANK_CHECK(ctx, back(dWire, wireBytes) == wire, what + ": the wire bytes differ");
        const auto floatsEqual = [](const std::vector<uint8_t>& a, const std::vector<float>& b) {
          return firstDifference(fwFloat32, a.data(), reinterpret_cast<const uint8_t*>(b.data()), b.size()) == b.size();
        };
        RANK_CHECK(ctx, floatsEqual(back(dResidual, kCount * 4), hostResidual), what + ": the residuals differ");
        RANK_CHECK(ctx, floatsEqual(back(dAcc, kCount * 4), acc), what + ": decode-and-add differs");
        const auto gotDecoded = back(dDecoded, input.size());
        RANK_CHECK(ctx, firstDifference(type, gotDecoded.data(), decoded.data(), kCount) == kCount,
                   what + ": decode differs");
        for (void* p : {dIn, dWire, dResidual, dAcc, dDecoded}) device->freeDevice(p);
      }
    }
    // Speed: int8 encode of 256 MiB of float32, against copying those bytes.
    const size_t big = size_t{64} << 20;
    void* dBig = onDevice(big * 4, nullptr);
    void* dCopy = onDevice(big * 4, nullptr);
    void* dWire = onDevice(big * 2, nullptr);
    RANK_CHECK(ctx, dBig && dCopy && dWire, "256 MiB buffers");
    if (dBig && dCopy && dWire) {
      RANK_CHECK(ctx, device->zeroAsync(dBig, big * 4, stream).isOk(), "zero");
      auto seconds = [&](auto&& work) {
        bool ok = work().isOk() && device->synchronize(stream, 60000).isOk();
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < 5; ++i) ok = ok && work().isOk();
        ok = ok && device->synchronize(stream, 60000).isOk();
        RANK_CHECK(ctx, ok, "timed device work");
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 5;
      };
      const double copy = seconds([&] { return device->copyAsync(dCopy, dBig, big * 4, stream); });
      kernels::CodecStep encode;
      encode.op = kernels::CodecStep::Op::Encode;
      encode.format = fwCompressInt8;
      encode.blockSize = 256;
      encode.src = dBig;
      encode.dst = dWire;
      encode.count = big;
      const double quantize = seconds([&] { return device->codecAsync(encode, stream); });
      std::printf("256 MiB float32: copy %.2f ms (%.0f GB/s), int8 encode %.2f ms (%.0f GB/s read), %.0f%% of the copy\n",
                  copy * 1e3, big * 4 / copy / 1e9, quantize * 1e3, big * 4 / quantize / 1e9, 100 * copy / quantize);
    }
    for (void* p : {dBig, dCopy, dWire}) if (p) device->freeDevice(p);
    device->destroyStream(stream);
    return failures;
  });
  EXPECT_EQ(outcomes[0].exitCode, 0);
}

TEST(Gpu, ForcedNcclWithSharedGpuFailsAtCreation) {
  SKIP_WITHOUT_GPU();
  auto outcomes = runRanks(2, [](const RankContext& ctx) {
    int failures = 0;
    setenv("FAIRWAY_INTRA_TRANSPORT", "nccl", 1);
    cudaSetDevice(0);
    fwComm_t comm = nullptr;
    fwResult_t result = fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank);
    RANK_CHECK(ctx, result == fwInvalidUsage, "forced NCCL on a shared GPU must fail at creation");
    RANK_CHECK(ctx, std::string(fwGetLastErrorMessage()).find("share GPU") != std::string::npos,
               "the message names the shared GPU");
    return failures;
  });
  for (size_t r = 0; r < outcomes.size(); ++r) EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
}

}  // namespace
}  // namespace fairway::testing
