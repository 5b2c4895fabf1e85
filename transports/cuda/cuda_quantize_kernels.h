// Compression steps on device memory, on a stream: what compressed
// collectives on device buffers run between their messages. The same
// results as the host's loops (src/core/quantize_kernels.inc).
#pragma once

#include <cuda_runtime_api.h>

#include "core/quantize_kernels.h"

namespace fairway::cuda {

// cudaErrorInvalidValue for a step the host has no kernel for.
cudaError_t launchCodecStep(const kernels::CodecStep& step, cudaStream_t stream);

}  // namespace fairway::cuda
