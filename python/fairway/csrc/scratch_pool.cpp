#include "scratch_pool.h"

namespace fairway_torch {

at::Tensor ScratchPool::take(int64_t numel, const at::TensorOptions& options) {
  const size_t bytes = static_cast<size_t>(numel) * c10::elementSize(c10::typeMetaToScalarType(options.dtype()));
  if (options.device().is_cpu() && bytes > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i) {
      const size_t size = free_[i].nbytes();
      if (size >= bytes && size <= 2 * bytes && (best == free_.size() || size < free_[best].nbytes())) best = i;
    }
    if (best != free_.size()) {
      c10::Storage storage = std::move(free_[best]);
      free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
      freeBytes_ -= storage.nbytes();
      return at::empty({0}, options).set_(storage, 0, {numel}, {1});
    }
  }
  return at::empty({numel}, options);
}

void ScratchPool::give(const at::Tensor& t) {
  if (!t.defined() || !t.is_cpu()) return;
  c10::Storage storage = t.storage();
  if (storage.nbytes() > kMaxFreeBytes) return;
  std::lock_guard<std::mutex> lock(mutex_);
  // The oldest buffers make room: a job's sizes change (warm-up, a new
  // model), and the pool must follow them rather than keep the first.
  while (!free_.empty() && (freeBytes_ + storage.nbytes() > kMaxFreeBytes || free_.size() >= kMaxFreeBuffers)) {
    freeBytes_ -= free_.front().nbytes();
    free_.erase(free_.begin());
  }
  freeBytes_ += storage.nbytes();
  free_.push_back(std::move(storage));
}

}  // namespace fairway_torch
