#include "providers/device_data_space.h"

#include <new>

namespace fairway {

RuntimeScratch::RuntimeScratch(DeviceRuntime& device, StagingBuffer::Kind kind)
    : regions_{{device, kind}, {device, kind}, {device, kind}, {device, kind}} {}

char* RuntimeScratch::get(ScratchRegion region, size_t bytes) {
  const auto index = static_cast<size_t>(region);
  // At least one byte, so an empty region still has an address.
  const size_t wanted = bytes > 0 ? bytes : 1;
  if (!regions_[index].reserve(wanted).isOk()) throw std::bad_alloc();
  if (sizes_[index] < wanted) sizes_[index] = wanted;
  return regions_[index].data();
}

size_t RuntimeScratch::totalBytes() const {
  size_t total = 0;
  for (size_t size : sizes_) total += size;
  return total;
}

DeviceDataSpace::DeviceDataSpace(DeviceRuntime& device, int64_t timeoutMs)
    : device_(device), stream_(device, timeoutMs), scratch_(device, StagingBuffer::Kind::Device) {}

Status DeviceDataSpace::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return Status::ok();
  return stream_.run([&](void* stream) { return device_.copyAsync(dst, src, bytes, stream); });
}

Status DeviceDataSpace::combine(const Reducer& reducer, void* dst, const void* a, const void* b, size_t count) {
  if (count == 0) return Status::ok();
  return stream_.run([&](void* stream) {
    return device_.combineAsync(dst, a, b, count, reducer.datatype(), reducer.op(), stream);
  });
}

Status DeviceDataSpace::finalize(const Reducer& reducer, void* buf, size_t count) {
  if (count == 0 || !reducer.finalizes()) return Status::ok();
  return stream_.run([&](void* stream) {
    return device_.divideAsync(buf, count, reducer.datatype(), reducer.divisor(), stream);
  });
}

Status DeviceDataSpace::codec(const kernels::CodecStep& step) {
  if (step.count == 0) return Status::ok();
  return stream_.run([&](void* stream) { return device_.codecAsync(step, stream); });
}

Status DeviceDataSpace::zero(void* dst, size_t bytes) {
  if (bytes == 0) return Status::ok();
  return stream_.run([&](void* stream) { return device_.zeroAsync(dst, bytes, stream); });
}

}  // namespace fairway
