// Built with -mavx2 -mf16c (see src/CMakeLists.txt); used only where the CPU has both.
#define FAIRWAY_KERNEL_ISA avx2
#include "core/reduce_kernels.inc"
#include "core/quantize_kernels.inc"
#include "core/copy_kernels.inc"
