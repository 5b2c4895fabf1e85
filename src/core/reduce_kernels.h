// Reduction kernels, one set per instruction set; Reducer picks the best
// set the CPU supports.
#pragma once

#include <cstddef>

#include "fairway/fairway.h"

namespace fairway::kernels {

using CombineFn = void (*)(void* dst, const void* a, const void* b, size_t count);
using FinalizeFn = void (*)(void* buf, size_t count, int divisor);

struct Kernels {
  CombineFn combine;
  FinalizeFn divide;
};

// Whether this CPU runs the avx2 set (AVX2 and F16C).
bool avx2Usable();

namespace baseline { Kernels kernelsFor(fwDataType_t datatype, fwRedOp_t op); }
namespace avx2 { Kernels kernelsFor(fwDataType_t datatype, fwRedOp_t op); }

}  // namespace fairway::kernels
