// Where each rank's block of a collective's buffer lies: the chunks of one
// buffer (a ChunkLayout from its base), or, in the list forms (torch's
// all_gather into a list, reduce_scatter from one), an address of its own
// per block. Providers that copy block by block (the shared-memory node)
// read and write either without a pass through one packed buffer.
#pragma once

#include <cstddef>

#include "algorithms/chunk_layout.h"

namespace fairway {

// Byte is char (outputs) or const char (inputs).
template <typename Byte>
class BlockAddresses {
 public:
  // Block q at layout.chunkOffset(q) elements from base.
  BlockAddresses(Byte* base, const ChunkLayout& layout, size_t elementSize)
      : base_(base), layout_(layout), elementSize_(elementSize) {}
  // Block q at list[q], each of layout.chunkCount(q) elements; list must
  // outlive this.
  BlockAddresses(Byte* const* list, const ChunkLayout& layout, size_t elementSize)
      : list_(list), layout_(layout), elementSize_(elementSize) {}

  // Element `elems` of block q.
  Byte* at(int q, size_t elems) const {
    Byte* block = list_ != nullptr ? list_[q] : base_ + layout_.chunkOffset(q) * elementSize_;
    return block + elems * elementSize_;
  }
  const ChunkLayout& layout() const { return layout_; }
  // The list of the list form; null for a buffer cut by the layout.
  Byte* const* list() const { return list_; }

 private:
  Byte* base_ = nullptr;
  Byte* const* list_ = nullptr;
  ChunkLayout layout_;
  size_t elementSize_;
};

using OutputBlocks = BlockAddresses<char>;
using InputBlocks = BlockAddresses<const char>;

}  // namespace fairway
