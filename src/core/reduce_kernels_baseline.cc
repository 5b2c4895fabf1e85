#define FAIRWAY_KERNEL_ISA baseline
#include "core/reduce_kernels.inc"
#include "core/quantize_kernels.inc"
#include "core/copy_kernels.inc"
