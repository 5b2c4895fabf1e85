#include "core/reducer.h"

#include <cpuid.h>

#include "core/reduce_kernels.h"

namespace fairway {
namespace {

// F16C from CPUID leaf 1 (ECX bit 29): not every compiler's
// __builtin_cpu_supports knows the name; AVX2's check also covers the OS
// saving the wide registers.
bool cpuHasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

kernels::Kernels kernelsFor(fwDataType_t datatype, fwRedOp_t op) {
  static const bool hasAvx2 = kernels::avx2Usable();
  return hasAvx2 ? kernels::avx2::kernelsFor(datatype, op) : kernels::baseline::kernelsFor(datatype, op);
}

}  // namespace

bool kernels::avx2Usable() { return __builtin_cpu_supports("avx2") && cpuHasF16c(); }

Reducer::Reducer(fwDataType_t datatype, fwRedOp_t op, int nranks) : datatype_(datatype), op_(op), nranks_(nranks) {
  kernels::Kernels k = kernelsFor(datatype, op);
  combine_ = k.combine;
  finalize_ = (op == fwAvg) ? k.divide : nullptr;
}

}  // namespace fairway
