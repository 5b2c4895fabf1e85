#include "providers/pinned_wire.h"

namespace fairway {
namespace {

constexpr size_t kSmallestBlock = 4096;

size_t blockSizeFor(size_t bytes) {
  size_t size = kSmallestBlock;
  while (size < bytes) size *= 2;
  return size;
}

}  // namespace

// The smallest free block that fits, else a new one of the next power of two.
Status PinnedWire::acquire(size_t bytes, char** out) {
  const size_t wanted = blockSizeFor(bytes);
  Block* best = nullptr;
  for (Block& b : blocks_) {
    if (!b.inUse && b.bytes >= wanted && (best == nullptr || b.bytes < best->bytes)) best = &b;
  }
  if (best == nullptr) {
    auto memory = std::make_unique<StagingBuffer>(device_, StagingBuffer::Kind::Pinned);
    FW_RETURN_IF_ERROR(memory->reserve(wanted).withContext("a pinned bounce buffer for a staged message"));
    blocks_.push_back({std::move(memory), wanted, false});
    best = &blocks_.back();
  }
  best->inUse = true;
  *out = best->memory->data();
  return Status::ok();
}

void PinnedWire::release(char* buffer) {
  for (Block& b : blocks_) {
    if (b.memory->data() == buffer) {
      b.inUse = false;
      return;
    }
  }
}

size_t PinnedWire::pooledBytes() const {
  size_t total = 0;
  for (const Block& b : blocks_) total += b.bytes;
  return total;
}

}  // namespace fairway
