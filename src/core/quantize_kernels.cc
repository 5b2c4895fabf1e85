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

}  // namespace fairway::kernels
