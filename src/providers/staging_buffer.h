// A buffer of pinned host or device memory that only grows, for staging
// device data through the host and for device-side scratch. Freed with the
// owner; reserve() keeps the old contents only when no growth is needed.
#pragma once

#include <cstddef>

#include "core/status.h"
#include "transports/device_runtime.h"

namespace fairway {

class StagingBuffer {
 public:
  enum class Kind { Pinned, Device };
  StagingBuffer(DeviceRuntime& device, Kind kind) : device_(device), kind_(kind) {}
  ~StagingBuffer() { release(); }
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  Status reserve(size_t bytes) {
    if (bytes_ >= bytes) return Status::ok();
    release();
    FW_RETURN_IF_ERROR(kind_ == Kind::Pinned ? device_.allocatePinned(bytes, &data_)
                                             : device_.allocateDevice(bytes, &data_));
    bytes_ = bytes;
    return Status::ok();
  }
  char* data() const { return static_cast<char*>(data_); }

 private:
  void release() {
    if (data_ != nullptr) kind_ == Kind::Pinned ? device_.freePinned(data_) : device_.freeDevice(data_);
    data_ = nullptr;
    bytes_ = 0;
  }

  DeviceRuntime& device_;
  Kind kind_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace fairway
