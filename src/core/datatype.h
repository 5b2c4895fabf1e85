// Facts about fwDataType_t and fwRedOp_t values, and 16-bit float conversion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cstring>

#include "fairway/fairway.h"

namespace fairway {

// Inline: every call checks its arguments with these.
inline bool isValidDatatype(int datatype) { return datatype >= 0 && datatype < fwNumTypes; }
inline bool isValidOp(int op) { return op >= 0 && op < fwNumOps; }
inline size_t datatypeSize(fwDataType_t datatype) {
  switch (datatype) {
    case fwInt8: case fwUint8: case fwFloat8e4m3: case fwFloat8e5m2: return 1;
    case fwFloat16: case fwBfloat16: return 2;
    case fwInt32: case fwUint32: case fwFloat32: return 4;
    case fwInt64: case fwUint64: case fwFloat64: return 8;
    default: return 0;
  }
}
const char* datatypeName(fwDataType_t datatype);
const char* opName(fwRedOp_t op);
inline bool isIntegerType(fwDataType_t datatype) { return datatype <= fwUint64; }
// Bitwise ops are defined on integer types only; the rest on every type.
inline bool isOpDefinedFor(fwRedOp_t op, fwDataType_t datatype) {
  const bool bitwise = op == fwBand || op == fwBor || op == fwBxor;
  return !bitwise || isIntegerType(datatype);
}

float halfToFloat(uint16_t bits);
uint16_t floatToHalf(float value);  // round to nearest even
// An 8-bit float with E exponent and M mantissa bits (bias 2^(E-1) - 1):
// fwFloat8e4m3 has no infinities and its all-ones codes are NaN;
// fwFloat8e5m2 is IEEE-like. Encoding rounds to nearest even, saturating
// to the largest finite value (infinities included); NaN stays NaN. Inline
// and on bits: the reduction loops convert every element.
template <int E, int M, bool kIeee>
struct Minifloat {
  static constexpr int kBias = (1 << (E - 1)) - 1;
  static constexpr uint8_t kNan = 0x7f;  // a NaN in both formats
  static constexpr uint8_t kMaxCode = kIeee ? static_cast<uint8_t>(((1 << E) - 2) << M | ((1 << M) - 1)) : 0x7e;

  static float decode(uint8_t code) {
    const uint32_t sign = static_cast<uint32_t>(code & 0x80) << 24;
    const uint32_t exponent = (code >> M) & ((1u << E) - 1);
    const uint32_t mantissa = code & ((1u << M) - 1);
    uint32_t bits;
    if (kIeee ? exponent == (1u << E) - 1 : (code & 0x7f) == 0x7f) {
      bits = 0x7f800000u | (mantissa != 0 || !kIeee ? 0x400000u : 0u);  // NaN, or (e5m2) infinity
    } else if (exponent == 0) {
      // Subnormal: mantissa units of 2^(1 - bias - M), exact in float32.
      const float magnitude = static_cast<float>(mantissa) * (1.0f / static_cast<float>(1u << (kBias - 1 + M)));
      std::memcpy(&bits, &magnitude, sizeof(bits));
    } else {
      bits = ((exponent + 127 - kBias) << 23) | (mantissa << (23 - M));
    }
    bits |= sign;
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    return value;
  }

  static uint8_t encode(float value) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    const uint32_t sign = (bits >> 24) & 0x80;
    const uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return kNan;
    constexpr int kShift = 23 - M;  // float mantissa bits dropped
    constexpr uint32_t kSmallestNormal = static_cast<uint32_t>(127 + 1 - kBias) << 23;
    uint32_t code;
    if (magnitude >= kSmallestNormal) {
      // Round the float's bits at the kept mantissa's last place (to even;
      // a carry moves into the exponent as it should), rebias, saturate.
      const uint32_t rounded = magnitude + ((1u << (kShift - 1)) - 1) + ((magnitude >> kShift) & 1);
      const uint32_t rebiased = (rounded >> kShift) - (static_cast<uint32_t>(127 - kBias) << M);
      code = rebiased > kMaxCode ? kMaxCode : rebiased;
    } else {
      // Subnormal (or zero): units of the smallest subnormal, rounded to
      // even by the FPU; scaling by a power of two is exact.
      float absolute;
      std::memcpy(&absolute, &magnitude, sizeof(absolute));
      code = static_cast<uint32_t>(std::nearbyint(absolute * static_cast<float>(1u << (kBias - 1 + M))));
    }
    return static_cast<uint8_t>(sign | code);
  }
};
using Float8e4m3 = Minifloat<4, 3, false>;
using Float8e5m2 = Minifloat<5, 2, true>;

inline float float8e4m3ToFloat(uint8_t code) { return Float8e4m3::decode(code); }
inline float float8e5m2ToFloat(uint8_t code) { return Float8e5m2::decode(code); }
inline uint8_t floatToFloat8e4m3(float value) { return Float8e4m3::encode(value); }
inline uint8_t floatToFloat8e5m2(float value) { return Float8e5m2::encode(value); }

// Inline: the reduction and compression loops convert every element.
inline float bfloat16ToFloat(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}
inline uint16_t floatToBfloat16(float value) {  // round to nearest even; NaN stays a quiet NaN
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t roundingBias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + roundingBias) >> 16);
}

}  // namespace fairway
