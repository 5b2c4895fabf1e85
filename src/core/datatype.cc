#include "core/datatype.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>

namespace fairway {

const char* datatypeName(fwDataType_t datatype) {
  static const char* kNames[] = {"int8", "uint8", "int32", "uint32", "int64",
                                 "uint64", "half", "bfloat16", "float", "double", "float8e4m3", "float8e5m2"};
  return isValidDatatype(datatype) ? kNames[datatype] : "invalid";
}

const char* opName(fwRedOp_t op) {
  static const char* kNames[] = {"sum", "prod", "max", "min", "avg", "band", "bor", "bxor"};
  return isValidOp(op) ? kNames[op] : "invalid";
}

namespace {
uint32_t floatBits(float value) { uint32_t b; std::memcpy(&b, &value, 4); return b; }
float bitsFloat(uint32_t bits) { float v; std::memcpy(&v, &bits, 4); return v; }
}  // namespace

float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return bitsFloat(sign | 0x7f800000u | (mantissa << 13));  // inf, nan
  if (exponent != 0) return bitsFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Subnormal half: value = mantissa * 2^-24, exact in float.
  float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  return sign ? -magnitude : magnitude;
}

uint16_t floatToHalf(float value) {
  uint32_t bits = floatBits(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t absBits = bits & 0x7fffffffu;
  if (absBits >= 0x7f800000u) {  // inf or nan (keep nan quiet)
    return static_cast<uint16_t>(sign | 0x7c00u | (absBits > 0x7f800000u ? 0x200u : 0));
  }
  if (absBits >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (absBits < 0x38800000u) {
    // Result is subnormal (or zero): scale so the integer part is the mantissa,
    // and let the FPU round to nearest even.
    float magnitude = bitsFloat(absBits) * 16777216.0f;  // 2^24
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(magnitude)));
  }
  uint32_t exponent = (absBits >> 23) - 112;
  uint32_t mantissa = absBits & 0x7fffffu;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // carries into exponent correctly
  return static_cast<uint16_t>(sign | half);
}

}  // namespace fairway
