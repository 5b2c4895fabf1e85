// Facts about fwDataType_t and fwRedOp_t values, and 16-bit float conversion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fairway/fairway.h"

namespace fairway {

bool isValidDatatype(int datatype);
bool isValidOp(int op);
size_t datatypeSize(fwDataType_t datatype);
const char* datatypeName(fwDataType_t datatype);
const char* opName(fwRedOp_t op);
bool isIntegerType(fwDataType_t datatype);
// Bitwise ops are defined on integer types only; the rest on every type.
bool isOpDefinedFor(fwRedOp_t op, fwDataType_t datatype);

float halfToFloat(uint16_t bits);
uint16_t floatToHalf(float value);  // round to nearest even
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
