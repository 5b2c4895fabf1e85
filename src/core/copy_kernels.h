// Copy loops for the shared-memory collectives, one per instruction set
// (copy_kernels.inc); copyKernel() picks the best the CPU runs.
#pragma once

#include <cstddef>

namespace fairway::kernels {

// Copies bytes of src to b and, when a is not null, to a as well, reading
// src once; b gets streaming (non-temporal) stores when streamingB.
using CopyFn = void (*)(char* a, char* b, const char* src, size_t bytes, bool streamingB);

// From this many bytes, a copy to two destinations that sit alike against
// the stores' width runs in one pass; below it, or where they sit apart,
// in two (copy_kernels.inc). A caller free to place a destination aligns
// it like the other from here on.
constexpr size_t kOnePassFromBytes = 32 * 1024;

namespace baseline { CopyFn copyFn(); }
namespace avx2 { CopyFn copyFn(); }

// The avx2 loop where avx2Usable(), the baseline one elsewhere.
CopyFn copyKernel();

}  // namespace fairway::kernels
