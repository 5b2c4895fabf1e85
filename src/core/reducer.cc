#include "core/reducer.h"

#include "core/reduce_kernels.h"

namespace fairway {
namespace {

kernels::Kernels kernelsFor(fwDataType_t datatype, fwRedOp_t op) {
  static const bool hasAvx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return hasAvx2 ? kernels::avx2::kernelsFor(datatype, op) : kernels::baseline::kernelsFor(datatype, op);
}

}  // namespace

Reducer::Reducer(fwDataType_t datatype, fwRedOp_t op, int nranks) : nranks_(nranks) {
  kernels::Kernels k = kernelsFor(datatype, op);
  combine_ = k.combine;
  finalize_ = (op == fwAvg) ? k.divide : nullptr;
}

}  // namespace fairway
