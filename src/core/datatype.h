// Facts about fwDataType_t and fwRedOp_t values, and 16-bit float conversion.
#pragma once

#include <cstddef>
#include <cstdint>

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
float bfloat16ToFloat(uint16_t bits);
uint16_t floatToBfloat16(float value);  // round to nearest even

}  // namespace fairway
