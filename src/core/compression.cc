#include "core/compression.h"

namespace fairway {

const char* compressionName(fwCompressKind_t kind) {
  switch (kind) {
    case fwCompressNone: return "none";
    case fwCompressFp16: return "fp16";
    case fwCompressBf16: return "bf16";
    case fwCompressInt8: return "int8";
    case fwCompressInt4: return "int4";
    default: return "?";
  }
}

}  // namespace fairway
