// A buffer of pinned host or device memory that only grows, for staging
// device data through the host and for device-side scratch. Freed with the
// owner; reserve() keeps the old contents only when no growth is needed.
//
// Growth is refused on a thread that a caller's stream is waiting for
// (GatedStreamScope): CUDA may make an allocation or a free wait until
// every stream of the device has drained, the waiting one included, and
// that stream waits for this very thread: a deadlock no timeout ends.
#pragma once

#include <cstddef>
#include <string>

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

  // Marks this thread, for the scope's life, as one a caller's stream waits for.
  class GatedStreamScope {
   public:
    GatedStreamScope() { gated() = true; }
    ~GatedStreamScope() { gated() = false; }
    GatedStreamScope(const GatedStreamScope&) = delete;
    GatedStreamScope& operator=(const GatedStreamScope&) = delete;
  };

  Status reserve(size_t bytes) {
    if (bytes_ >= bytes) return Status::ok();
    if (gated()) {
      return Status(fwInternalError,
                    "a device call needed " + std::to_string(bytes) + " bytes of " +
                        (kind_ == Kind::Pinned ? "pinned host" : "device") +
                        " memory more than its caller reserved, on a thread the caller's stream waits for "
                        "(allocating there can wait for that stream forever)");
    }
    release();
    FW_RETURN_IF_ERROR(kind_ == Kind::Pinned ? device_.allocatePinned(bytes, &data_)
                                             : device_.allocateDevice(bytes, &data_));
    bytes_ = bytes;
    return Status::ok();
  }
  char* data() const { return static_cast<char*>(data_); }
  size_t capacity() const { return bytes_; }

 private:
  static bool& gated() {
    thread_local bool onGatedThread = false;
    return onGatedThread;
  }
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
