// The staged wire of device buffers UCX cannot reach: bounce buffers of
// pinned host memory, pooled by power-of-two size so a call's messages
// reuse the buffers of the calls before it. The pool holds the most any
// call had in flight at once (the algorithms' windows bound that), and is
// freed with the communicator. Used on the communicator's worker only.
#pragma once

#include <memory>
#include <vector>

#include "algorithms/staged_wire.h"
#include "providers/staging_buffer.h"

namespace fairway {

class PinnedWire final : public StagedWire {
 public:
  explicit PinnedWire(DeviceRuntime& device) : device_(device) {}
  Status acquire(size_t bytes, char** out) override;
  void release(char* buffer) override;
  // Pinned bytes the pool holds.
  size_t pooledBytes() const;

 private:
  struct Block {
    std::unique_ptr<StagingBuffer> memory;
    size_t bytes;
    bool inUse;
  };
  DeviceRuntime& device_;
  std::vector<Block> blocks_;  // few: one per message a call has in flight at once
};

}  // namespace fairway
