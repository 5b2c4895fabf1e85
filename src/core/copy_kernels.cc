#include "core/copy_kernels.h"

#include "core/reduce_kernels.h"

namespace fairway::kernels {

CopyFn copyKernel() {
  // Decided on first use, not at load time: __builtin_cpu_supports needs
  // the CPU model initialised, which static constructors cannot count on.
  static const CopyFn chosen = avx2Usable() ? avx2::copyFn() : baseline::copyFn();
  return chosen;
}

}  // namespace fairway::kernels
