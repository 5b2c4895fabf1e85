// A stream of the device runtime's own, made on first use, for work whose
// result the host needs next (staging copies, a data space's steps, the
// node's NCCL calls): enqueue on it, then wait, bounded.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "transports/device_runtime.h"

namespace fairway {

class PrivateStream {
 public:
  PrivateStream(DeviceRuntime& device, int64_t timeoutMs) : device_(device), timeoutMs_(timeoutMs) {}
  ~PrivateStream() {
    if (stream_ != nullptr) device_.destroyStream(stream_);
  }
  PrivateStream(const PrivateStream&) = delete;
  PrivateStream& operator=(const PrivateStream&) = delete;

  // The stream, made on first use.
  Status get(void** out) {
    if (stream_ == nullptr) FW_RETURN_IF_ERROR(device_.createStream(&stream_));
    *out = stream_;
    return Status::ok();
  }
  // Everything enqueued on it has run, or fwTimeout after FAIRWAY_TIMEOUT_MS.
  Status wait() { return stream_ == nullptr ? Status::ok() : device_.synchronize(stream_, timeoutMs_); }
  // enqueue(stream) puts work on the stream; returns once it has run.
  template <typename Enqueue>
  Status run(Enqueue enqueue) {
    void* stream = nullptr;
    FW_RETURN_IF_ERROR(get(&stream));
    FW_RETURN_IF_ERROR(enqueue(stream));
    return wait();
  }

 private:
  DeviceRuntime& device_;
  int64_t timeoutMs_;
  void* stream_ = nullptr;
};

}  // namespace fairway
