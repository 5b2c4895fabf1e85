// Compression kernels (the wire formats of core/compression.h), one set per
// instruction set like the reduction kernels; codecFor picks the best set
// the CPU supports. Every set gives the same bits: plain float32 arithmetic
// without fused multiply-add, round to nearest even.
#pragma once

#include <cstddef>

#include "fairway/fairway.h"

namespace fairway::kernels {

// What one encoding step adds to the caller's error-feedback residual.
struct Lost {
  float* at = nullptr;  // null: nothing recorded
  float weight = 1;     // what one unit lost is worth in the residual's units
  bool accumulate = false;  // add to it; otherwise overwrite it
};

struct Codec {
  // Encodes count values of the source type (plus add[i], when add is not
  // null) into dst; with lost.at, records x - decode(encode(x)) there
  // (0 where that is not finite). add and lost.at may be the same buffer.
  void (*encode)(const void* src, const float* add, size_t count, int blockSize, void* dst, Lost lost);
  // acc[i] = (first ? 0 : acc[i]) + the decoded value, in float32.
  void (*decodeAdd)(const void* src, size_t count, int blockSize, float* acc, bool first);
  // dst[i] = the decoded value, in the destination type.
  void (*decode)(const void* src, size_t count, int blockSize, void* dst);
};
// Adds float32 values to a buffer of another type, rounding once.
using AddFloatFn = void (*)(void* dst, const void* src, const float* add, size_t count);
// Converts float32 values to another type (round to nearest even).
using FromFloatFn = void (*)(const float* src, size_t count, void* dst);

// valueType: the type encode reads and decode writes (float32, float16 or
// bfloat16); null members where the pair is not offered.
namespace baseline {
Codec codecFor(fwCompressKind_t kind, fwDataType_t valueType);
AddFloatFn addFloatFor(fwDataType_t type);
FromFloatFn fromFloatFor(fwDataType_t type);
}  // namespace baseline
namespace avx2 {
Codec codecFor(fwCompressKind_t kind, fwDataType_t valueType);
AddFloatFn addFloatFor(fwDataType_t type);
FromFloatFn fromFloatFor(fwDataType_t type);
}  // namespace avx2

// The best set this CPU runs.
Codec codecFor(fwCompressKind_t kind, fwDataType_t valueType);
AddFloatFn addFloatFor(fwDataType_t type);
FromFloatFn fromFloatFor(fwDataType_t type);

}  // namespace fairway::kernels
