// Device-side twins of the host's reduction loops (src/core/reduce_kernels.inc),
// bit for bit but for NaN payloads (the GPU's arithmetic returns its
// canonical NaN): integers wrap (computed in the unsigned type), 16-bit and
// 8-bit floats are widened to float32 and rounded back to nearest even (8-bit
// ones saturating to their largest finite value), max keeps a
// unless a < b and min keeps a unless b < a (as std::max and std::min), and
// avg's division runs in 64-bit integers or in float32/64.
#include "transports/cuda/cuda_reduce_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

namespace fairway::cuda {
namespace {

template <typename T> struct Widen {
  using type = T;
  __device__ static T in(T v) { return v; }
  __device__ static T out(T v) { return v; }
};
template <> struct Widen<__half> {
  using type = float;
  __device__ static float in(__half v) { return __half2float(v); }
  __device__ static __half out(float v) { return __float2half_rn(v); }
};
template <> struct Widen<__nv_bfloat16> {
  using type = float;
  __device__ static float in(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 out(float v) { return __float2bfloat16_rn(v); }
};

// 8-bit floats: widened through half (exact), rounded back to nearest even
// saturating to the largest finite value, as the host's loops do.
template <__nv_fp8_interpretation_t kKind>
struct Fp8 { __nv_fp8_storage_t bits; };
template <__nv_fp8_interpretation_t kKind> struct Widen<Fp8<kKind>> {
  using type = float;
  __device__ static float in(Fp8<kKind> v) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(v.bits, kKind))); }
  __device__ static Fp8<kKind> out(float v) { return Fp8<kKind>{__nv_cvt_float_to_fp8(v, __NV_SATFINITE, kKind)}; }
};
using Fp8E4m3 = Fp8<__NV_E4M3>;
using Fp8E5m2 = Fp8<__NV_E5M2>;

// Chosen lazily: make_unsigned of a floating type does not exist.
template <typename T>
using Arith = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>, std::common_type<T>>::type;

struct Sum {
  template <typename T> __device__ static T apply(T a, T b) {
    return static_cast<T>(static_cast<Arith<T>>(a) + static_cast<Arith<T>>(b));
  }
};
struct Prod {
  template <typename T> __device__ static T apply(T a, T b) {
    return static_cast<T>(static_cast<Arith<T>>(a) * static_cast<Arith<T>>(b));
  }
};
struct Max { template <typename T> __device__ static T apply(T a, T b) { return a < b ? b : a; } };
struct Min { template <typename T> __device__ static T apply(T a, T b) { return b < a ? b : a; } };
struct Band { template <typename T> __device__ static T apply(T a, T b) { return a & b; } };
struct Bor { template <typename T> __device__ static T apply(T a, T b) { return a | b; } };
struct Bxor { template <typename T> __device__ static T apply(T a, T b) { return a ^ b; } };

template <typename T, typename Op>
__global__ void combineKernel(T* dst, const T* a, const T* b, size_t count) {
  using W = Widen<T>;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    dst[i] = W::out(Op::apply(W::in(a[i]), W::in(b[i])));
  }
}

template <typename T>
using Quotient = std::conditional_t<std::is_integral_v<T>, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>,
                                    typename Widen<T>::type>;

template <typename T>
__global__ void divideKernel(T* buf, size_t count, int divisor) {
  using W = Widen<T>;
  using A = typename W::type;
  using Q = Quotient<T>;
  const Q n = static_cast<Q>(divisor);
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    buf[i] = W::out(static_cast<A>(static_cast<Q>(W::in(buf[i])) / n));
  }
}

constexpr unsigned kThreads = 256;
constexpr size_t kMostBlocks = 4096;  // grid-stride beyond: enough to fill any current GPU

unsigned blocksFor(size_t count) {
  const size_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMostBlocks ? blocks : kMostBlocks);
}

template <typename T, typename Op>
cudaError_t combineWith(void* dst, const void* a, const void* b, size_t count, cudaStream_t stream) {
  combineKernel<T, Op><<<blocksFor(count), kThreads, 0, stream>>>(static_cast<T*>(dst), static_cast<const T*>(a),
                                                                  static_cast<const T*>(b), count);
  return cudaGetLastError();
}

template <typename T>
cudaError_t combineArithmetic(void* dst, const void* a, const void* b, size_t count, fwRedOp_t op,
                              cudaStream_t stream) {
  switch (op) {
    case fwSum: case fwAvg: return combineWith<T, Sum>(dst, a, b, count, stream);
    case fwProd: return combineWith<T, Prod>(dst, a, b, count, stream);
    case fwMax: return combineWith<T, Max>(dst, a, b, count, stream);
    case fwMin: return combineWith<T, Min>(dst, a, b, count, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <typename T>
cudaError_t combineInteger(void* dst, const void* a, const void* b, size_t count, fwRedOp_t op, cudaStream_t stream) {
  switch (op) {
    case fwBand: return combineWith<T, Band>(dst, a, b, count, stream);
    case fwBor: return combineWith<T, Bor>(dst, a, b, count, stream);
    case fwBxor: return combineWith<T, Bxor>(dst, a, b, count, stream);
    default: return combineArithmetic<T>(dst, a, b, count, op, stream);
  }
}

template <typename T>
cudaError_t divideAs(void* buf, size_t count, int divisor, cudaStream_t stream) {
  divideKernel<T><<<blocksFor(count), kThreads, 0, stream>>>(static_cast<T*>(buf), count, divisor);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launchCombine(void* dst, const void* a, const void* b, size_t count, fwDataType_t datatype,
                          fwRedOp_t op, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  switch (datatype) {
    case fwInt8: return combineInteger<int8_t>(dst, a, b, count, op, stream);
    case fwUint8: return combineInteger<uint8_t>(dst, a, b, count, op, stream);
    case fwInt32: return combineInteger<int32_t>(dst, a, b, count, op, stream);
    case fwUint32: return combineInteger<uint32_t>(dst, a, b, count, op, stream);
    case fwInt64: return combineInteger<int64_t>(dst, a, b, count, op, stream);
    case fwUint64: return combineInteger<uint64_t>(dst, a, b, count, op, stream);
    case fwFloat16: return combineArithmetic<__half>(dst, a, b, count, op, stream);
    case fwBfloat16: return combineArithmetic<__nv_bfloat16>(dst, a, b, count, op, stream);
    case fwFloat32: return combineArithmetic<float>(dst, a, b, count, op, stream);
    case fwFloat64: return combineArithmetic<double>(dst, a, b, count, op, stream);
    case fwFloat8e4m3: return combineArithmetic<Fp8E4m3>(dst, a, b, count, op, stream);
    case fwFloat8e5m2: return combineArithmetic<Fp8E5m2>(dst, a, b, count, op, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launchDivide(void* buf, size_t count, fwDataType_t datatype, int divisor, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (divisor == 0) return cudaErrorInvalidValue;
  switch (datatype) {
    case fwInt8: return divideAs<int8_t>(buf, count, divisor, stream);
    case fwUint8: return divideAs<uint8_t>(buf, count, divisor, stream);
    case fwInt32: return divideAs<int32_t>(buf, count, divisor, stream);
    case fwUint32: return divideAs<uint32_t>(buf, count, divisor, stream);
    case fwInt64: return divideAs<int64_t>(buf, count, divisor, stream);
    case fwUint64: return divideAs<uint64_t>(buf, count, divisor, stream);
    case fwFloat16: return divideAs<__half>(buf, count, divisor, stream);
    case fwBfloat16: return divideAs<__nv_bfloat16>(buf, count, divisor, stream);
    case fwFloat32: return divideAs<float>(buf, count, divisor, stream);
    case fwFloat64: return divideAs<double>(buf, count, divisor, stream);
    case fwFloat8e4m3: return divideAs<Fp8E4m3>(buf, count, divisor, stream);
    case fwFloat8e5m2: return divideAs<Fp8E5m2>(buf, count, divisor, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace fairway::cuda
