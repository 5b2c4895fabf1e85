// Copies into and out of the node's segment, through the copy loop of
// core/copy_kernels.inc (why not memcpy: see there).
//
// Results bound for a large buffer the collective will not read again may
// use streaming (non-temporal) stores instead: they bypass the cache (no
// read of the destination's lines first, nothing evicted from the segment).
#pragma once

#include <cstddef>
#include <cstdint>

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

}  // namespace fairway
