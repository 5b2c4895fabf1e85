#include "core/quantize_kernels.h"

#include "core/reduce_kernels.h"

namespace fairway::kernels {
namespace {
bool useAvx2() {
  static const bool usable = avx2Usable();
  return usable;
}
}  // namespace

Codec codecFor(fwCompressKind_t kind, fwDataType_t valueType) {
  return useAvx2() ? avx2::codecFor(kind, valueType) : baseline::codecFor(kind, valueType);
}
AddFloatFn addFloatFor(fwDataType_t type) { return useAvx2() ? avx2::addFloatFor(type) : baseline::addFloatFor(type); }
FromFloatFn fromFloatFor(fwDataType_t type) {
  return useAvx2() ? avx2::fromFloatFor(type) : baseline::fromFloatFor(type);
}

bool runOnCpu(const CodecStep& s) {
  if (s.count == 0) return true;
  switch (s.op) {
    case CodecStep::Op::Encode:
    case CodecStep::Op::DecodeAdd:
    case CodecStep::Op::Decode: {
      const Codec codec = codecFor(s.format, s.op == CodecStep::Op::DecodeAdd ? fwFloat32 : s.valueType);
      if (codec.encode == nullptr) return false;
      if (s.op == CodecStep::Op::Encode) codec.encode(s.src, s.add, s.count, s.blockSize, s.dst, s.lost);
      if (s.op == CodecStep::Op::DecodeAdd) codec.decodeAdd(s.src, s.count, s.blockSize, static_cast<float*>(s.dst), s.first);
      if (s.op == CodecStep::Op::Decode) codec.decode(s.src, s.count, s.blockSize, s.dst);
      return true;
    }
    case CodecStep::Op::FromFloat: {
      const FromFloatFn convert = fromFloatFor(s.valueType);
      if (convert == nullptr) return false;
      convert(static_cast<const float*>(s.src), s.count, s.dst);
      return true;
    }
    case CodecStep::Op::AddFloat: {
      const AddFloatFn add = addFloatFor(s.valueType);
      if (add == nullptr) return false;
      add(s.dst, s.src, s.add, s.count);
      return true;
    }
  }
  return false;
}

}  // namespace fairway::kernels
