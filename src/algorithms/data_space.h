// Where a collective's data lives, and how an algorithm copies, combines
// and keeps scratch memory there. Host buffers use the CPU's reduction
// loops and memcpy; device buffers that UCX reaches directly use the
// device runtime (copies and reduction kernels on a stream of its own), so
// every algorithm is written once and runs on either memory.
#pragma once

#include <cstddef>
#include <cstring>

#include "core/bytes.h"
#include "core/copy_kernels.h"
#include "core/quantize_kernels.h"
#include "core/reducer.h"
#include "core/status.h"
#include "p2p/scratch.h"
#include "transports/transport.h"

namespace fairway {

// The scratch regions of Scratch, in the space's own memory: an
// algorithm's own, the collective layer's staging, a composite algorithm's
// (valid while the algorithms it runs use theirs), and a hierarchical
// algorithm's rail buffers.
enum class ScratchRegion { Algorithm, Staging, Outer, Rail };
constexpr int kScratchRegions = 4;

class DataSpace {
 public:
  virtual ~DataSpace() = default;
  virtual bool onDevice() const = 0;
  // Where its buffers' bytes are, as a transport is told (host memory for
  // the host-emulated runtime's device buffers).
  virtual MemoryType memoryType() const = 0;
  // dst and src are the same or disjoint; done when it returns.
  virtual Status copy(void* dst, const void* src, size_t bytes) = 0;
  // dst[i] = a[i] op b[i] with the reducer's type and op (dst may be a or b).
  virtual Status combine(const Reducer& reducer, void* dst, const void* a, const void* b, size_t count) = 0;
  // The reducer's finalisation (avg's division), if it has one.
  virtual Status finalize(const Reducer& reducer, void* buf, size_t count) = 0;
  // A compression step (core/quantize_kernels.h) on buffers of this space.
  virtual Status codec(const kernels::CodecStep& step) = 0;
  // dst = bytes zeros.
  virtual Status zero(void* dst, size_t bytes) = 0;
  // At least `bytes` of the region, valid until the next call of this
  // region; grow-only. Throws std::bad_alloc when memory runs out.
  virtual char* scratch(ScratchRegion region, size_t bytes) = 0;
};

// Memory the CPU works on: the copy and reduction loops.
class CpuDataSpace : public DataSpace {
 public:
  bool onDevice() const override { return false; }
  MemoryType memoryType() const override { return MemoryType::Host; }
  // Copies of 2 KiB to 128 KiB take the copy loop (core/copy_kernels.inc):
  // glibc's memcpy moves those with `rep movsb`, about 2 GB/s on the
  // reference machine (a root's 64 KiB copy of send into recv held 2-rank
  // out-of-place broadcast of 64 KiB to 2.4 GB/s busbw). Larger ones keep
  // memcpy. It streams its stores past the caches only from glibc's own
  // threshold (between 32 and 64 MiB there), and from there it beat the
  // loop's streaming stores by 4-11%; between 4 and 32 MiB it ran at
  // 4.6-6.5 GB/s against the streaming loop's 5.9-20.
  Status copy(void* dst, const void* src, size_t bytes) override {
    if (dst == src) return Status::ok();
    if (bytes >= kLoopCopyFromBytes && bytes <= kLoopCopyToBytes) {
      kernels::copyKernel()(nullptr, static_cast<char*>(dst), static_cast<const char*>(src), bytes, false);
    } else {
      copyBytes(dst, src, bytes);
    }
    return Status::ok();
  }
  static constexpr size_t kLoopCopyFromBytes = 2 * 1024, kLoopCopyToBytes = 128 * 1024;
  Status combine(const Reducer& reducer, void* dst, const void* a, const void* b, size_t count) override {
    reducer.combine(dst, a, b, count);
    return Status::ok();
  }
  Status finalize(const Reducer& reducer, void* buf, size_t count) override {
    reducer.finalize(buf, count);
    return Status::ok();
  }
  Status codec(const kernels::CodecStep& step) override {
    return kernels::runOnCpu(step) ? Status::ok()
                                   : Status(fwInternalError, "no compression kernel for this step on the CPU");
  }
  Status zero(void* dst, size_t bytes) override {
    if (bytes > 0) std::memset(dst, 0, bytes);
    return Status::ok();
  }
};

// Host buffers: scratch comes from Scratch.
class HostDataSpace final : public CpuDataSpace {
 public:
  explicit HostDataSpace(Scratch& scratch) : scratch_(scratch) {}
  char* scratch(ScratchRegion region, size_t bytes) override {
    switch (region) {
      case ScratchRegion::Algorithm: return static_cast<char*>(scratch_.bytes(bytes));
      case ScratchRegion::Staging: return static_cast<char*>(scratch_.staging(bytes));
      case ScratchRegion::Outer: return static_cast<char*>(scratch_.outerBytes(bytes));
      case ScratchRegion::Rail: return static_cast<char*>(scratch_.railBytes(bytes));
    }
    return nullptr;
  }

 private:
  Scratch& scratch_;
};

}  // namespace fairway
