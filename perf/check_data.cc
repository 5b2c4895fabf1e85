#include "perf/check_data.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/datatype.h"

namespace fairway::check {
namespace {

// Every input lies in [0, kInputValues): fillTyped converts each once.
constexpr int kInputValues = 128;

// Products stay within every type's exact range with factors of 1 and 2;
// bitwise ops get 7-bit patterns; the rest small values in [1, 8].
int64_t inputValue(fwRedOp_t op, int rank, size_t index, int seed) {
  uint64_t h = (index + 1) * 2654435761u + static_cast<uint64_t>(rank) * 40503u + static_cast<uint64_t>(seed) * 97u;
  h ^= h >> 13;
  switch (op) {
    case fwProd: return 1 + static_cast<int64_t>(h % 2);
    case fwBand: case fwBor: case fwBxor: return static_cast<int64_t>(h % kInputValues);
    default: return 1 + static_cast<int64_t>(h % 8);
  }
}

template <typename T> struct Storage {
  static T from(double v) { return static_cast<T>(v); }
  static double to(T v) { return static_cast<double>(v); }
};
struct Half { uint16_t bits; };
struct Bf16 { uint16_t bits; };
struct Fp8E4m3 { uint8_t bits; };
struct Fp8E5m2 { uint8_t bits; };
template <> struct Storage<Half> {
  static Half from(double v) { return Half{floatToHalf(static_cast<float>(v))}; }
  static double to(Half v) { return halfToFloat(v.bits); }
};
template <> struct Storage<Bf16> {
  static Bf16 from(double v) { return Bf16{floatToBfloat16(static_cast<float>(v))}; }
  static double to(Bf16 v) { return bfloat16ToFloat(v.bits); }
};

template <> struct Storage<Fp8E4m3> {
  static Fp8E4m3 from(double v) { return Fp8E4m3{floatToFloat8e4m3(static_cast<float>(v))}; }
  static double to(Fp8E4m3 v) { return float8e4m3ToFloat(v.bits); }
};
template <> struct Storage<Fp8E5m2> {
  static Fp8E5m2 from(double v) { return Fp8E5m2{floatToFloat8e5m2(static_cast<float>(v))}; }
  static double to(Fp8E5m2 v) { return float8e5m2ToFloat(v.bits); }
};

template <typename T>
constexpr bool kIsInteger = std::is_integral_v<T>;
constexpr size_t kReduceBlock = 256;

// f(std::integral_constant<fwRedOp_t, op>{}): loops over elements see the
// op as a constant, so they hold no switch and vectorize. An op outside
// the enum passes fwNumOps (no combining: rank 0's values).
template <typename F>
void withConstantOp(fwRedOp_t op, F&& f) {
  switch (op) {
    case fwSum: return f(std::integral_constant<fwRedOp_t, fwSum>{});
    case fwProd: return f(std::integral_constant<fwRedOp_t, fwProd>{});
    case fwMax: return f(std::integral_constant<fwRedOp_t, fwMax>{});
    case fwMin: return f(std::integral_constant<fwRedOp_t, fwMin>{});
    case fwAvg: return f(std::integral_constant<fwRedOp_t, fwAvg>{});
    case fwBand: return f(std::integral_constant<fwRedOp_t, fwBand>{});
    case fwBor: return f(std::integral_constant<fwRedOp_t, fwBor>{});
    case fwBxor: return f(std::integral_constant<fwRedOp_t, fwBxor>{});
    default: return f(std::integral_constant<fwRedOp_t, fwNumOps>{});
  }
}

template <typename T>
constexpr bool kIsFp8 = std::is_same_v<T, Fp8E4m3> || std::is_same_v<T, Fp8E5m2>;

// What rank contributes in type T: 8-bit floats hold every integer only up
// to 8 (e5m2), so their sums add 0s and 1s, exact up to 8 ranks.
template <typename T>
int64_t valueOf(fwRedOp_t op, int rank, size_t index, int seed) {
  const int64_t v = inputValue(op, rank, index, seed);
  return kIsFp8<T> && (op == fwSum || op == fwAvg) ? v % 2 : v;
}

// Integer types combine with the type's own wrap-around; floats in double
// (exact for these inputs) and round once. Op is fixed at compile time
// and ranks are the outer loop over a block of indices, so the inner loop
// is branch-free and vectorizes: every rank of a test computes the whole
// expected result, nranks inputs per element.
template <typename T, fwRedOp_t Op>
void reduceBlockAcrossRanks(T* out, int nranks, size_t first, size_t count, int seed) {
  using Acc = std::conditional_t<kIsInteger<T>, T, double>;
  Acc acc[kReduceBlock];
  int64_t sum[kReduceBlock];  // integer avg: the sum before the type's division
  for (size_t j = 0; j < count; ++j) {
    const int64_t v = valueOf<T>(Op, 0, first + j, seed);
    acc[j] = static_cast<Acc>(v);
    if constexpr (Op == fwAvg && kIsInteger<T>) sum[j] = v;
  }
  for (int r = 1; r < nranks; ++r) {
    for (size_t j = 0; j < count; ++j) {
      // Inputs are below kInputValues: through int32_t, the conversion to double vectorizes.
      const Acc v = static_cast<Acc>(static_cast<int32_t>(valueOf<T>(Op, r, first + j, seed)));
      if constexpr (Op == fwSum || Op == fwAvg) acc[j] = static_cast<Acc>(acc[j] + v);
      if constexpr (Op == fwAvg && kIsInteger<T>) sum[j] += v;
      if constexpr (Op == fwProd) acc[j] = static_cast<Acc>(acc[j] * v);
      if constexpr (Op == fwMax) acc[j] = acc[j] > v ? acc[j] : v;
      if constexpr (Op == fwMin) acc[j] = acc[j] < v ? acc[j] : v;
      if constexpr (kIsInteger<T> && Op == fwBand) acc[j] = static_cast<Acc>(acc[j] & v);
      if constexpr (kIsInteger<T> && Op == fwBor) acc[j] = static_cast<Acc>(acc[j] | v);
      if constexpr (kIsInteger<T> && Op == fwBxor) acc[j] = static_cast<Acc>(acc[j] ^ v);
    }
  }
  for (size_t j = 0; j < count; ++j) {
    if constexpr (kIsInteger<T>) {
      out[j] = Op == fwAvg ? static_cast<T>(static_cast<T>(sum[j]) / static_cast<T>(nranks)) : acc[j];
    } else {
      out[j] = Storage<T>::from(Op == fwAvg ? acc[j] / nranks : acc[j]);
    }
  }
}

template <typename T, fwRedOp_t Op>
void fillReducedWith(T* out, int nranks, size_t first, size_t count, int seed) {
  for (size_t b = 0; b < count; b += kReduceBlock) {
    reduceBlockAcrossRanks<T, Op>(out + b, nranks, first + b, std::min(kReduceBlock, count - b), seed);
  }
}

template <typename T>
void fillTyped(void* buf, fwRedOp_t op, int rank, size_t first, size_t count, int seed) {
  // Every input is below kInputValues: each is converted to T once, not
  // once per element (half and bfloat16 conversions are calls).
  T asT[kInputValues];
  for (int v = 0; v < kInputValues; ++v) asT[v] = Storage<T>::from(static_cast<double>(v));
  T* out = static_cast<T*>(buf);
  withConstantOp(op, [&](auto constantOp) {
    for (size_t i = 0; i < count; ++i) out[i] = asT[valueOf<T>(constantOp.value, rank, first + i, seed)];
  });
}

template <typename T>
void fillReducedTyped(void* buf, fwRedOp_t op, int nranks, size_t first, size_t count, int seed) {
  T* out = static_cast<T*>(buf);
  withConstantOp(op, [&](auto constantOp) {
    fillReducedWith<T, decltype(constantOp)::value>(out, nranks, first, count, seed);
  });
}

template <typename T>
size_t countWrongTyped(const void* actual, const void* expected, size_t count, double tolerance) {
  const T* a = static_cast<const T*>(actual);
  const T* e = static_cast<const T*>(expected);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    double x = Storage<T>::to(a[i]);
    double y = Storage<T>::to(e[i]);
    if (kIsInteger<T> ? x != y : !(std::fabs(x - y) <= tolerance * std::fabs(y))) ++wrong;
  }
  return wrong;
}

template <typename T>
SquaredError squaredErrorTyped(const void* actual, const void* expected, size_t count) {
  const T* a = static_cast<const T*>(actual);
  const T* e = static_cast<const T*>(expected);
  SquaredError s;
  for (size_t i = 0; i < count; ++i) {
    const double x = Storage<T>::to(a[i]), y = Storage<T>::to(e[i]);
    s.error += (x - y) * (x - y);
    s.reference += y * y;
  }
  return s;
}

template <template <typename> class F, typename... Args>
auto dispatch(fwDataType_t datatype, Args&&... args) {
  switch (datatype) {
    case fwInt8: return F<int8_t>::run(args...);
    case fwUint8: return F<uint8_t>::run(args...);
    case fwInt32: return F<int32_t>::run(args...);
    case fwUint32: return F<uint32_t>::run(args...);
    case fwInt64: return F<int64_t>::run(args...);
    case fwUint64: return F<uint64_t>::run(args...);
    case fwFloat16: return F<Half>::run(args...);
    case fwBfloat16: return F<Bf16>::run(args...);
    case fwFloat32: return F<float>::run(args...);
    case fwFloat8e4m3: return F<Fp8E4m3>::run(args...);
    case fwFloat8e5m2: return F<Fp8E5m2>::run(args...);
    default: return F<double>::run(args...);
  }
}

template <typename T> struct Fill { template <typename... A> static int run(A... a) { fillTyped<T>(a...); return 0; } };
template <typename T> struct FillReduced {
  template <typename... A> static int run(A... a) { fillReducedTyped<T>(a...); return 0; }
};
template <typename T> struct CountWrong {
  template <typename... A> static size_t run(A... a) { return countWrongTyped<T>(a...); }
};
template <typename T> struct SquaredErrorOf {
  template <typename... A> static SquaredError run(A... a) { return squaredErrorTyped<T>(a...); }
};

}  // namespace

size_t elementSize(fwDataType_t datatype) { return datatypeSize(datatype); }

SquaredError squaredError(const void* actual, const void* expected, fwDataType_t datatype, size_t count) {
  return dispatch<SquaredErrorOf>(datatype, actual, expected, count);
}

void fill(void* buf, fwDataType_t datatype, fwRedOp_t op, int rank, size_t firstIndex, size_t count, int seed) {
  dispatch<Fill>(datatype, buf, op, rank, firstIndex, count, seed);
}

void fillReduced(void* out, fwDataType_t datatype, fwRedOp_t op, int nranks, size_t firstIndex, size_t count,
                 int seed) {
  dispatch<FillReduced>(datatype, out, op, nranks, firstIndex, count, seed);
}

size_t countWrong(const void* actual, const void* expected, fwDataType_t datatype, size_t count) {
  const bool narrow = datatype == fwFloat16 || datatype == fwBfloat16 || datatype == fwFloat8e4m3 ||
                      datatype == fwFloat8e5m2;
  double tolerance = narrow ? 1e-2 : datatype == fwFloat32 ? 1e-5 : 1e-12;
  return dispatch<CountWrong>(datatype, actual, expected, count, tolerance);
}

void fillGathered(void* out, fwDataType_t datatype, int nranks, size_t each, int seed) {
  for (int r = 0; r < nranks; ++r) {
    fill(static_cast<char*>(out) + r * each * elementSize(datatype), datatype, fwSum, r, 0, each, seed);
  }
}

void corruptFirst(void* buf, fwDataType_t datatype) {
  static_cast<unsigned char*>(buf)[elementSize(datatype) - 1] ^= 0xFF;  // little-endian: the sign and exponent
}

}  // namespace fairway::check
