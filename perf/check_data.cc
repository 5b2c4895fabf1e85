#include "perf/check_data.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/datatype.h"

namespace fairway::check {
namespace {

// Products stay within every type's exact range with factors of 1 and 2;
// bitwise ops get 7-bit patterns; the rest small values in [1, 8].
int64_t inputValue(fwRedOp_t op, int rank, size_t index, int seed) {
  uint64_t h = (index + 1) * 2654435761u + static_cast<uint64_t>(rank) * 40503u + static_cast<uint64_t>(seed) * 97u;
  h ^= h >> 13;
  switch (op) {
    case fwProd: return 1 + static_cast<int64_t>(h % 2);
    case fwBand: case fwBor: case fwBxor: return static_cast<int64_t>(h % 128);
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
// (exact for these inputs) and round once.
template <typename T>
T reduceAcrossRanks(fwRedOp_t op, int nranks, size_t index, int seed) {
  if constexpr (kIsInteger<T>) {
    T acc = static_cast<T>(valueOf<T>(op, 0, index, seed));
    int64_t sum = valueOf<T>(op, 0, index, seed);
    for (int r = 1; r < nranks; ++r) {
      T v = static_cast<T>(valueOf<T>(op, r, index, seed));
      sum += v;
      switch (op) {
        case fwSum: case fwAvg: acc = static_cast<T>(acc + v); break;
        case fwProd: acc = static_cast<T>(acc * v); break;
        case fwMax: acc = acc > v ? acc : v; break;
        case fwMin: acc = acc < v ? acc : v; break;
        case fwBand: acc = static_cast<T>(acc & v); break;
        case fwBor: acc = static_cast<T>(acc | v); break;
        case fwBxor: acc = static_cast<T>(acc ^ v); break;
        default: break;
      }
    }
    return op == fwAvg ? static_cast<T>(static_cast<T>(sum) / static_cast<T>(nranks)) : acc;
  } else {
    double acc = static_cast<double>(valueOf<T>(op, 0, index, seed));
    for (int r = 1; r < nranks; ++r) {
      double v = static_cast<double>(valueOf<T>(op, r, index, seed));
      switch (op) {
        case fwSum: case fwAvg: acc += v; break;
        case fwProd: acc *= v; break;
        case fwMax: acc = std::max(acc, v); break;
        case fwMin: acc = std::min(acc, v); break;
        default: break;
      }
    }
    return Storage<T>::from(op == fwAvg ? acc / nranks : acc);
  }
}

template <typename T>
void fillTyped(void* buf, fwRedOp_t op, int rank, size_t first, size_t count, int seed) {
  T* out = static_cast<T*>(buf);
  for (size_t i = 0; i < count; ++i) out[i] = Storage<T>::from(static_cast<double>(valueOf<T>(op, rank, first + i, seed)));
}

template <typename T>
void fillReducedTyped(void* buf, fwRedOp_t op, int nranks, size_t first, size_t count, int seed) {
  T* out = static_cast<T*>(buf);
  for (size_t i = 0; i < count; ++i) out[i] = reduceAcrossRanks<T>(op, nranks, first + i, seed);
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
