// Device-side twins of the host's compression loops
// (src/core/quantize_kernels.inc): the same wire formats and, arithmetic
// step for step, the same bits. Products and sums are spelled with the
// _rn intrinsics so the compiler cannot fuse them into multiply-adds the
// host does not do; division is IEEE (no fast math); rintf rounds to
// nearest even like the host's nearbyint.
#include "transports/cuda/cuda_quantize_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace fairway::cuda {
namespace {

using kernels::CodecStep;

template <typename T> struct Value;
template <> struct Value<float> {
  __device__ static float in(float v) { return v; }
  __device__ static float out(float v) { return v; }
};
// CUDA's conversions turn every NaN into their canonical one (0x7fff); the
// host's (floatToHalf, floatToBfloat16) keep the sign and, for bfloat16, the
// payload's high bits, quieted. The wire must not depend on where it was
// encoded, so a NaN narrows here as it does there.
template <> struct Value<__half> {
  __device__ static float in(__half v) { return __half2float(v); }
  __device__ static __half out(float v) {
    if (!isnan(v)) return __float2half_rn(v);
    __half_raw nan;
    nan.x = static_cast<unsigned short>(((__float_as_uint(v) >> 16) & 0x8000u) | 0x7e00u);
    return __half(nan);
  }
};
template <> struct Value<__nv_bfloat16> {
  __device__ static float in(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 out(float v) {
    if (!isnan(v)) return __float2bfloat16_rn(v);
    __nv_bfloat16_raw nan;
    nan.x = static_cast<unsigned short>((__float_as_uint(v) >> 16) | 0x40u);
    return __nv_bfloat16(nan);
  }
};

struct LostArgs {
  float* at;
  float weight;
  bool accumulate;
};

// lost[i] (+)= weight * (x - decoded), 0 where that is not finite.
__device__ void record(LostArgs lost, size_t i, float x, float decoded) {
  if (lost.at == nullptr) return;
  float e = __fsub_rn(x, decoded);
  e = (__fsub_rn(e, e) == 0.f) ? __fmul_rn(e, lost.weight) : 0.f;
  lost.at[i] = lost.accumulate ? __fadd_rn(lost.at[i], e) : e;
}

__device__ float gathered(float value, const float* add, size_t i) {
  return add != nullptr ? __fadd_rn(value, add[i]) : value;
}

constexpr unsigned kThreads = 256;

unsigned gridFor(size_t items) {
  const size_t blocks = (items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

#define FW_GRID_STRIDE(i, n)                                                                     \
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < (n);          \
       i += static_cast<size_t>(gridDim.x) * blockDim.x)

// ---- casts: W is the wire type ----

template <typename T, typename W>
__global__ void encodeCast(const T* src, const float* add, size_t count, W* dst, LostArgs lost) {
  FW_GRID_STRIDE(i, count) {
    const float x = gathered(Value<T>::in(src[i]), add, i);
    dst[i] = Value<W>::out(x);
    record(lost, i, x, Value<W>::in(dst[i]));
  }
}

template <typename W>
__global__ void decodeAddCast(const W* src, size_t count, float* acc, bool first) {
  FW_GRID_STRIDE(i, count) { acc[i] = first ? Value<W>::in(src[i]) : __fadd_rn(acc[i], Value<W>::in(src[i])); }
}

template <typename W, typename T>
__global__ void decodeCast(const W* src, size_t count, T* dst) {
  FW_GRID_STRIDE(i, count) { dst[i] = Value<T>::out(Value<W>::in(src[i])); }
}

// ---- int8 / int4 blocks: the float32 scales, then the values ----

template <int Bits> __device__ constexpr float levels() { return Bits == 8 ? 127.f : 7.f; }
template <int Bits> __host__ __device__ size_t valueBytes(size_t values) { return Bits == 8 ? values : (values + 1) / 2; }

template <int Bits>
__device__ int8_t valueAt(const uint8_t* values, size_t i) {
  if (Bits == 8) return static_cast<int8_t>(values[i]);
  const int nibble = (values[i / 2] >> ((i % 2) * 4)) & 0xf;
  return static_cast<int8_t>((nibble ^ 8) - 8);
}

// One thread block per quantization block: the largest magnitude as bits
// (Inf and NaN sort above every finite value), then the values.
template <typename T, int Bits>
__global__ void encodeBlocks(const T* src, const float* add, size_t count, size_t blockSize, uint8_t* dst,
                             LostArgs lost) {
  __shared__ uint32_t most[kThreads];
  const size_t blocks = (count + blockSize - 1) / blockSize;
  uint8_t* values = dst + blocks * sizeof(float);
  for (size_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const size_t begin = b * blockSize;
    const size_t n = min(blockSize, count - begin);
    uint32_t mine = 0;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
      const float x = gathered(Value<T>::in(src[begin + i]), add, begin + i);
      mine = max(mine, __float_as_uint(x) & 0x7fffffffu);
    }
    most[threadIdx.x] = mine;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) most[threadIdx.x] = max(most[threadIdx.x], most[threadIdx.x + half]);
      __syncthreads();
    }
    const uint32_t top = most[0];
    const float scale = top >= 0x7f800000u ? __int_as_float(0x7fc00000) : __fdiv_rn(__uint_as_float(top), levels<Bits>());
    if (threadIdx.x == 0) reinterpret_cast<float*>(dst)[b] = scale;
    uint8_t* out = values + valueBytes<Bits>(begin);
    // Each thread owns whole bytes: one value (int8) or two (int4).
    const size_t perByte = Bits == 8 ? 1 : 2;
    for (size_t j = threadIdx.x; j < valueBytes<Bits>(n); j += blockDim.x) {
      uint8_t byte = 0;
      for (size_t k = 0; k < perByte && j * perByte + k < n; ++k) {
        const size_t i = begin + j * perByte + k;
        const float x = gathered(Value<T>::in(src[i]), add, i);
        int8_t q = 0;
        if (scale > 0.f) q = static_cast<int8_t>(fmaxf(-levels<Bits>(), fminf(levels<Bits>(), rintf(__fdiv_rn(x, scale)))));
        byte |= Bits == 8 ? static_cast<uint8_t>(q) : static_cast<uint8_t>((q & 0xf) << (4 * k));
        record(lost, i, x, __fmul_rn(static_cast<float>(q), scale));
      }
      out[j] = byte;
    }
    __syncthreads();  // `most` is reused by the next block
  }
}

template <int Bits>
__global__ void decodeAddBlocks(const uint8_t* src, size_t count, size_t blockSize, float* acc, bool first) {
  const size_t blocks = (count + blockSize - 1) / blockSize;
  const float* scales = reinterpret_cast<const float*>(src);
  const uint8_t* values = src + blocks * sizeof(float);
  FW_GRID_STRIDE(i, count) {
    const float v = __fmul_rn(static_cast<float>(valueAt<Bits>(values, i)), scales[i / blockSize]);
    acc[i] = first ? v : __fadd_rn(acc[i], v);
  }
}

template <int Bits, typename T>
__global__ void decodeBlocks(const uint8_t* src, size_t count, size_t blockSize, T* dst) {
  const size_t blocks = (count + blockSize - 1) / blockSize;
  const float* scales = reinterpret_cast<const float*>(src);
  const uint8_t* values = src + blocks * sizeof(float);
  FW_GRID_STRIDE(i, count) {
    dst[i] = Value<T>::out(__fmul_rn(static_cast<float>(valueAt<Bits>(values, i)), scales[i / blockSize]));
  }
}

template <typename T>
__global__ void fromFloat(const float* src, size_t count, T* dst) {
  FW_GRID_STRIDE(i, count) { dst[i] = Value<T>::out(src[i]); }
}

template <typename T>
__global__ void addFloat(T* dst, const T* src, const float* add, size_t count) {
  FW_GRID_STRIDE(i, count) { dst[i] = Value<T>::out(__fadd_rn(Value<T>::in(src[i]), add[i])); }
}

template <typename T>
cudaError_t launchFor(const CodecStep& s, cudaStream_t stream) {
  const LostArgs lost{s.lost.at, s.lost.weight, s.lost.accumulate};
  const unsigned grid = gridFor(s.count);
  const size_t block = static_cast<size_t>(s.blockSize);
  const size_t quantBlocks = (s.count + block - 1) / block;
  const unsigned blocksGrid = static_cast<unsigned>(quantBlocks < 65535 ? quantBlocks : 65535);
  const T* src = static_cast<const T*>(s.src);
  switch (s.op) {
    case CodecStep::Op::Encode:
      switch (s.format) {
        case fwCompressFp16: encodeCast<T, __half><<<grid, kThreads, 0, stream>>>(src, s.add, s.count, static_cast<__half*>(s.dst), lost); break;
        case fwCompressBf16: encodeCast<T, __nv_bfloat16><<<grid, kThreads, 0, stream>>>(src, s.add, s.count, static_cast<__nv_bfloat16*>(s.dst), lost); break;
        case fwCompressInt8: encodeBlocks<T, 8><<<blocksGrid, kThreads, 0, stream>>>(src, s.add, s.count, block, static_cast<uint8_t*>(s.dst), lost); break;
        case fwCompressInt4: encodeBlocks<T, 4><<<blocksGrid, kThreads, 0, stream>>>(src, s.add, s.count, block, static_cast<uint8_t*>(s.dst), lost); break;
        default: return cudaErrorInvalidValue;
      }
      break;
    case CodecStep::Op::Decode:
      switch (s.format) {
        case fwCompressFp16: decodeCast<__half, T><<<grid, kThreads, 0, stream>>>(static_cast<const __half*>(s.src), s.count, static_cast<T*>(s.dst)); break;
        case fwCompressBf16: decodeCast<__nv_bfloat16, T><<<grid, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(s.src), s.count, static_cast<T*>(s.dst)); break;
        case fwCompressInt8: decodeBlocks<8, T><<<grid, kThreads, 0, stream>>>(static_cast<const uint8_t*>(s.src), s.count, block, static_cast<T*>(s.dst)); break;
        case fwCompressInt4: decodeBlocks<4, T><<<grid, kThreads, 0, stream>>>(static_cast<const uint8_t*>(s.src), s.count, block, static_cast<T*>(s.dst)); break;
        default: return cudaErrorInvalidValue;
      }
      break;
    case CodecStep::Op::FromFloat:
      fromFloat<T><<<grid, kThreads, 0, stream>>>(static_cast<const float*>(s.src), s.count, static_cast<T*>(s.dst));
      break;
    case CodecStep::Op::AddFloat:
      addFloat<T><<<grid, kThreads, 0, stream>>>(static_cast<T*>(s.dst), src, s.add, s.count);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launchDecodeAdd(const CodecStep& s, cudaStream_t stream) {
  const unsigned grid = gridFor(s.count);
  const size_t block = static_cast<size_t>(s.blockSize);
  float* acc = static_cast<float*>(s.dst);
  switch (s.format) {
    case fwCompressFp16: decodeAddCast<__half><<<grid, kThreads, 0, stream>>>(static_cast<const __half*>(s.src), s.count, acc, s.first); break;
    case fwCompressBf16: decodeAddCast<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(s.src), s.count, acc, s.first); break;
    case fwCompressInt8: decodeAddBlocks<8><<<grid, kThreads, 0, stream>>>(static_cast<const uint8_t*>(s.src), s.count, block, acc, s.first); break;
    case fwCompressInt4: decodeAddBlocks<4><<<grid, kThreads, 0, stream>>>(static_cast<const uint8_t*>(s.src), s.count, block, acc, s.first); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launchCodecStep(const kernels::CodecStep& step, cudaStream_t stream) {
  if (step.count == 0) return cudaSuccess;
  if (step.op == CodecStep::Op::DecodeAdd) return launchDecodeAdd(step, stream);
  switch (step.valueType) {
    case fwFloat32: return launchFor<float>(step, stream);
    case fwFloat16: return launchFor<__half>(step, stream);
    case fwBfloat16: return launchFor<__nv_bfloat16>(step, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace fairway::cuda
