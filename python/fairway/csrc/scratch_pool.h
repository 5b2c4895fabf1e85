// Temporaries of the list and coalesced forms (packed inputs, gathered
// outputs), reused from call to call. A fresh large CPU tensor is a fresh
// mapping whose first touch faults in and zeroes every page: at 64 MiB
// that cost more than the collective itself, on every call. A buffer goes
// back when its call has completed and its data has been copied out.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include <ATen/ATen.h>

namespace fairway_torch {

class ScratchPool {
 public:
  // A contiguous tensor of `numel` elements of `options`' dtype and
  // device: on the CPU from a free buffer of at least that size (at most
  // twice it) when there is one; on a GPU always fresh (torch's caching
  // allocator already reuses device memory).
  at::Tensor take(int64_t numel, const at::TensorOptions& options);
  // Returns t's buffer for later calls: t must be one `take` gave and no
  // longer in use. Past kMaxFreeBytes or kMaxFreeBuffers the oldest free
  // buffers are dropped (freed once nothing holds them).
  void give(const at::Tensor& t);

  static constexpr size_t kMaxFreeBytes = size_t{256} << 20;
  static constexpr size_t kMaxFreeBuffers = 16;

 private:
  std::mutex mutex_;
  std::vector<c10::Storage> free_;  // oldest first
  size_t freeBytes_ = 0;
};

}  // namespace fairway_torch
