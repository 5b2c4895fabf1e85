// Copies into and out of the node's segment, through the copy loop of
// core/copy_kernels.inc (why not memcpy: see there), and the rank-order
// combine every reduction of the segment shares.
//
// Results bound for a large buffer the collective will not read again may
// use streaming (non-temporal) stores instead: they bypass the cache (no
// read of the destination's lines first, nothing evicted from the segment).
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/context.h"
#include "core/copy_kernels.h"

namespace fairway {

// Whether [a, a + bytes) and [b, b + bytes) share a byte.
inline bool overlaps(const void* a, const void* b, size_t bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return bytes > 0 && x < y + bytes && y < x + bytes;
}

inline void segmentCopy(void* dst, const void* src, size_t bytes) {
  kernels::copyKernel()(nullptr, static_cast<char*>(dst), static_cast<const char*>(src), bytes, false);
}

// A result's copy to the caller's buffer, with streaming stores when asked.
inline void resultCopy(void* dst, const void* src, size_t bytes, bool streaming) {
  kernels::copyKernel()(nullptr, static_cast<char*>(dst), static_cast<const char*>(src), bytes, streaming);
}

// Copies src to both a and b, reading it once; b with streaming stores
// when streamB.
inline void segmentCopyTwice(void* a, void* b, const void* src, size_t bytes, bool streamB) {
  kernels::copyKernel()(static_cast<char*>(a), static_cast<char*>(b), static_cast<const char*>(src), bytes, streamB);
}

// dst = slice(0) op slice(1) op ... op slice(ranks - 1), count elements
// each, in this order on every rank: every rank gets the same bits.
template <typename Slice>
void combineInRankOrder(const CollectiveContext& node, int ranks, char* dst, size_t count, Slice slice) {
  if (count == 0) return;
  if (ranks == 1) {
    if (slice(0) != dst) segmentCopy(dst, slice(0), count * node.elementSize());
    return;
  }
  node.reducer().combine(dst, slice(0), slice(1), count);
  for (int p = 2; p < ranks; ++p) node.reducer().combine(dst, dst, slice(p), count);
}

}  // namespace fairway
