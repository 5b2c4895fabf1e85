// memcpy and memmove for byte counts that may be zero. A collective called
// with count 0 may pass NULL buffers, and the C functions require valid
// pointers even for zero bytes (UBSan reports it), so zero copies nothing.
#pragma once

#include <cstddef>
#include <cstring>

namespace fairway {

inline void copyBytes(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

// For ranges that may overlap.
inline void moveBytes(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memmove(dst, src, bytes);
}

}  // namespace fairway
