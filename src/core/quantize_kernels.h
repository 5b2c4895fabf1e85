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

// One compression step on buffers, as a data space hands it to the CPU's
// kernels or to a device runtime (the CUDA plugin's kernels on a stream):
//  Encode:    dst (wire) = encode(src (valueType) + add), the loss into lost;
//  DecodeAdd: dst (float32) = (first ? 0 : dst) + decode(src);
//  Decode:    dst (valueType) = decode(src);
//  FromFloat: dst (valueType) = src (float32), rounded;
//  AddFloat:  dst (valueType) = src (valueType) + add, rounded once.
struct CodecStep {
  enum class Op { Encode, DecodeAdd, Decode, FromFloat, AddFloat };
  Op op = Op::Encode;
  fwCompressKind_t format = fwCompressNone;  // Encode, DecodeAdd, Decode
  int blockSize = 256;
  fwDataType_t valueType = fwFloat32;
  const void* src = nullptr;
  void* dst = nullptr;
  size_t count = 0;
  const float* add = nullptr;
  Lost lost;
  bool first = false;
};

// Runs a step with this CPU's kernels; false when there is no kernel for it.
bool runOnCpu(const CodecStep& step);

}  // namespace fairway::kernels
