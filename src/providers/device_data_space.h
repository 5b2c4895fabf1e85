// The data spaces of device buffers.
//
// Device memory as an algorithm's data space: copies and reductions are
// enqueued on a private stream of the device runtime and waited for before
// the call returns (bounded by FAIRWAY_TIMEOUT_MS), since the algorithm's
// next step hands the result to UCX; scratch is device memory. Used on
// the communicator's worker thread only, for device buffers that UCX
// reaches directly.
#pragma once

#include "algorithms/data_space.h"
#include "providers/private_stream.h"
#include "providers/staging_buffer.h"
#include "transports/device_runtime.h"

namespace fairway {

// The scratch regions of a data space in device or pinned memory:
// grow-only, like Scratch's; bad_alloc when memory runs out.
class RuntimeScratch {
 public:
  RuntimeScratch(DeviceRuntime& device, StagingBuffer::Kind kind);
  char* get(ScratchRegion region, size_t bytes);
  size_t totalBytes() const;

 private:
  StagingBuffer regions_[kScratchRegions];
  size_t sizes_[kScratchRegions] = {};
};

class DeviceDataSpace final : public DataSpace {
 public:
  DeviceDataSpace(DeviceRuntime& device, int64_t timeoutMs);

  bool onDevice() const override { return true; }
  MemoryType memoryType() const override { return device_.memoryIsCuda() ? MemoryType::Cuda : MemoryType::Host; }
  Status copy(void* dst, const void* src, size_t bytes) override;
  Status combine(const Reducer& reducer, void* dst, const void* a, const void* b, size_t count) override;
  Status finalize(const Reducer& reducer, void* buf, size_t count) override;
  Status codec(const kernels::CodecStep& step) override;
  Status zero(void* dst, size_t bytes) override;
  char* scratch(ScratchRegion region, size_t bytes) override { return scratch_.get(region, bytes); }
  // Device bytes held as scratch.
  size_t scratchBytes() const { return scratch_.totalBytes(); }

 private:
  DeviceRuntime& device_;
  // The algorithm reads or sends what it just wrote, so each step has run
  // before it returns.
  PrivateStream stream_;
  RuntimeScratch scratch_;
};

// Pinned host memory, where a hierarchical algorithm's rail phase works
// when UCX cannot reach device memory: the CPU combines, scratch is pinned
// so the copies from and to the device run at full speed.
class PinnedDataSpace final : public CpuDataSpace {
 public:
  explicit PinnedDataSpace(DeviceRuntime& device) : scratch_(device, StagingBuffer::Kind::Pinned) {}
  char* scratch(ScratchRegion region, size_t bytes) override { return scratch_.get(region, bytes); }
  size_t scratchBytes() const { return scratch_.totalBytes(); }

 private:
  RuntimeScratch scratch_;
};

}  // namespace fairway
