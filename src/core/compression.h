// A collective's compression (fwCompression_t, validated): the wire format
// of one piece of a buffer, and its size. A piece of n values is encoded
// on its own: casts as n 16-bit values; block formats as the float32 scale
// of each block (ceil(n / blockSize) of them) followed by the values (int8:
// n bytes; int4: two per byte, the even element in the low nibble, ceil(n
// / 2) bytes). Block sizes are even, so a block never shares a byte.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fairway/fairway.h"

namespace fairway {

constexpr int kDefaultCompressionBlock = 256;
// Block sizes offered: powers of two from 32 to 4096.
constexpr bool isValidCompressionBlock(long block) {
  return block >= 32 && block <= 4096 && (block & (block - 1)) == 0;
}

struct Compression {
  fwCompressKind_t kind = fwCompressNone;
  int blockSize = kDefaultCompressionBlock;
  float* residual = nullptr;  // error feedback, in the input's index space

  bool active() const { return kind != fwCompressNone; }
  bool blockwise() const { return kind == fwCompressInt8 || kind == fwCompressInt4; }
  size_t blocks(size_t values) const { return blockwise() ? (values + blockSize - 1) / blockSize : 0; }
  // Bytes of one encoded piece of `values` values.
  size_t encodedBytes(size_t values) const {
    switch (kind) {
      case fwCompressFp16: case fwCompressBf16: return 2 * values;
      case fwCompressInt8: return blocks(values) * sizeof(float) + values;
      case fwCompressInt4: return blocks(values) * sizeof(float) + (values + 1) / 2;
      default: return 0;
    }
  }
  // Bytes on the wire per input byte, for the cost model.
  double wireRatio(size_t elementSize) const {
    constexpr size_t kSample = size_t{1} << 16;
    return static_cast<double>(encodedBytes(kSample)) / static_cast<double>(kSample * elementSize);
  }
  // Where consecutive encoded pieces start in scratch: their scales stay aligned.
  size_t encodedStride(size_t values) const { return (encodedBytes(values) + 7) & ~size_t{7}; }
};

const char* compressionName(fwCompressKind_t kind);

}  // namespace fairway
