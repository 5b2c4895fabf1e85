// Device memory as an algorithm's data space: copies and reductions are
// enqueued on a private stream of the device runtime and waited for before
// the call returns (bounded by FAIRWAY_TIMEOUT_MS), since the algorithm's
// next step hands the result to UCX; scratch is device memory. Used on
// the communicator's worker thread only, for device buffers that UCX
// reaches directly.
#pragma once

#include "algorithms/data_space.h"
#include "comm/staging_buffer.h"
#include "transports/device_runtime.h"

namespace fairway {

class DeviceDataSpace final : public DataSpace {
 public:
  DeviceDataSpace(DeviceRuntime& device, int64_t timeoutMs);
  ~DeviceDataSpace() override;
  DeviceDataSpace(const DeviceDataSpace&) = delete;
  DeviceDataSpace& operator=(const DeviceDataSpace&) = delete;

  bool onDevice() const override { return true; }
  Status copy(void* dst, const void* src, size_t bytes) override;
  Status combine(const Reducer& reducer, void* dst, const void* a, const void* b, size_t count) override;
  Status finalize(const Reducer& reducer, void* buf, size_t count) override;
  char* scratch(ScratchRegion region, size_t bytes) override;
  // Device bytes held as scratch, for fairway-info.
  size_t scratchBytes() const;

 private:
  Status ensureStream();
  Status finish(Status enqueued);

  DeviceRuntime& device_;
  int64_t timeoutMs_;
  void* stream_ = nullptr;
  StagingBuffer regions_[3];  // by ScratchRegion
  size_t sizes_[3] = {0, 0, 0};
};

}  // namespace fairway
