// The loops are plain elementwise code the compiler vectorises; 16-bit
// floats are widened to float32 for the arithmetic and rounded back.
#include "core/reducer.h"

#include <algorithm>
#include <cstdint>

#include "core/datatype.h"

namespace fairway {
namespace {

struct Sum { template <typename T> static T apply(T a, T b) { return a + b; } };
struct Prod { template <typename T> static T apply(T a, T b) { return a * b; } };
struct Max { template <typename T> static T apply(T a, T b) { return std::max(a, b); } };
struct Min { template <typename T> static T apply(T a, T b) { return std::min(a, b); } };
struct Band { template <typename T> static T apply(T a, T b) { return a & b; } };
struct Bor { template <typename T> static T apply(T a, T b) { return a | b; } };
struct Bxor { template <typename T> static T apply(T a, T b) { return a ^ b; } };

// Storage and arithmetic types of the 16-bit floats.
struct Half { uint16_t bits; };
struct Bf16 { uint16_t bits; };
template <typename T> struct Widen { using type = T; static T in(T v) { return v; } static T out(T v) { return v; } };
template <> struct Widen<Half> {
  using type = float;
  static float in(Half v) { return halfToFloat(v.bits); }
  static Half out(float v) { return Half{floatToHalf(v)}; }
};
template <> struct Widen<Bf16> {
  using type = float;
  static float in(Bf16 v) { return bfloat16ToFloat(v.bits); }
  static Bf16 out(float v) { return Bf16{floatToBfloat16(v)}; }
};

template <typename T, typename Op>
void combineLoop(void* dst, const void* a, const void* b, size_t count) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  using W = Widen<T>;
  for (size_t i = 0; i < count; ++i) d[i] = W::out(Op::apply(W::in(x[i]), W::in(y[i])));
}

template <typename T>
void divideLoop(void* buf, size_t count, int divisor) {
  T* d = static_cast<T*>(buf);
  using W = Widen<T>;
  using A = typename W::type;
  const A n = static_cast<A>(divisor);
  for (size_t i = 0; i < count; ++i) d[i] = W::out(static_cast<A>(W::in(d[i]) / n));
}

template <typename T>
Reducer::CombineFn arithmeticCombine(fwRedOp_t op) {
  switch (op) {
    case fwSum: case fwAvg: return combineLoop<T, Sum>;
    case fwProd: return combineLoop<T, Prod>;
    case fwMax: return combineLoop<T, Max>;
    case fwMin: return combineLoop<T, Min>;
    default: return nullptr;
  }
}

template <typename T>
Reducer::CombineFn integerCombine(fwRedOp_t op) {
  switch (op) {
    case fwBand: return combineLoop<T, Band>;
    case fwBor: return combineLoop<T, Bor>;
    case fwBxor: return combineLoop<T, Bxor>;
    default: return arithmeticCombine<T>(op);
  }
}

struct Kernels { Reducer::CombineFn combine; Reducer::FinalizeFn divide; };

template <typename T>
Kernels integerKernels(fwRedOp_t op) { return {integerCombine<T>(op), divideLoop<T>}; }
template <typename T>
Kernels floatKernels(fwRedOp_t op) { return {arithmeticCombine<T>(op), divideLoop<T>}; }

Kernels kernelsFor(fwDataType_t datatype, fwRedOp_t op) {
  switch (datatype) {
    case fwInt8: return integerKernels<int8_t>(op);
    case fwUint8: return integerKernels<uint8_t>(op);
    case fwInt32: return integerKernels<int32_t>(op);
    case fwUint32: return integerKernels<uint32_t>(op);
    case fwInt64: return integerKernels<int64_t>(op);
    case fwUint64: return integerKernels<uint64_t>(op);
    case fwFloat16: return floatKernels<Half>(op);
    case fwBfloat16: return floatKernels<Bf16>(op);
    case fwFloat32: return floatKernels<float>(op);
    case fwFloat64: return floatKernels<double>(op);
    default: return {nullptr, nullptr};
  }
}

}  // namespace

Reducer::Reducer(fwDataType_t datatype, fwRedOp_t op, int nranks) : nranks_(nranks) {
  Kernels k = kernelsFor(datatype, op);
  combine_ = k.combine;
  finalize_ = (op == fwAvg) ? k.divide : nullptr;
}

}  // namespace fairway
