// Elementwise reductions on device memory, on a stream: what algorithms
// running on device buffers (UCX reaching GPU memory) need between their
// messages. The same results as the host's loops (src/core/reduce_kernels.inc).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "fairway/fairway.h"

namespace fairway::cuda {

// cudaErrorInvalidValue for a (datatype, op) pair the host has no loop for.
cudaError_t launchCombine(void* dst, const void* a, const void* b, size_t count, fwDataType_t datatype,
                          fwRedOp_t op, cudaStream_t stream);
cudaError_t launchDivide(void* buf, size_t count, fwDataType_t datatype, int divisor, cudaStream_t stream);

}  // namespace fairway::cuda
