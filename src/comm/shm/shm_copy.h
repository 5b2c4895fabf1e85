// Copies into and out of the node's segment. glibc's memcpy moves blocks
// of 2 KiB to 128 KiB with `rep movsb`, which on the reference machine (an
// AMD EPYC guest) runs at about 2 GB/s where a loop of 16-byte vector
// moves reaches 25 GB/s; every round here copies blocks of exactly those
// sizes, so they take the loop (SSE2: every x86-64 CPU has it).
//
// Results bound for a large buffer the collective will not read again may
// use streaming stores instead: they bypass the cache (no read of the
// destination's lines first, nothing evicted from the segment).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace fairway {
namespace copy_detail {

#if defined(__x86_64__)
template <bool kStreaming>
inline void store16(char* dst, __m128i v) {
  if constexpr (kStreaming) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst), v);
  } else {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), v);
  }
}

inline __m128i load16(const char* src) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(src)); }
#endif

// Bytes before dst's first 16-byte boundary (streaming stores need it).
inline size_t headTo16(const void* dst, size_t bytes) {
  const size_t head = (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16;
  return head < bytes ? head : bytes;
}

// Copies src to b and, when a is set, to a too, reading it once; b gets
// streaming stores when kStreamingB (it must then be 16-byte aligned).
// Whole 64-byte lines per step: a streaming store fills its line at once.
// Returns the bytes done: a multiple of 64, the rest is the caller's.
template <bool kStreamingB>
inline size_t copyLoop(char* a, char* b, const char* s, size_t bytes) {
  size_t i = 0;
#if defined(__x86_64__)
  for (; i + 64 <= bytes; i += 64) {
    __m128i v[4];
    for (int k = 0; k < 4; ++k) v[k] = load16(s + i + 16 * k);
    if (a != nullptr) {
      for (int k = 0; k < 4; ++k) store16<false>(a + i + 16 * k, v[k]);
    }
    for (int k = 0; k < 4; ++k) store16<kStreamingB>(b + i + 16 * k, v[k]);
  }
  // Streaming stores are weakly ordered: complete them before whatever
  // follows (a phase a peer reads) becomes visible.
  if (kStreamingB) _mm_sfence();
#endif
  return i;
}

// Copies src to a (may be null) and b, b with streaming stores when asked.
inline void copyTo(char* a, char* b, const char* s, size_t bytes, bool streamingB) {
  size_t i = 0;
  if (streamingB) {
    i = headTo16(b, bytes);  // up to b's first boundary with ordinary stores
    if (a != nullptr) std::memcpy(a, s, i);
    std::memcpy(b, s, i);
  }
  const size_t rest = bytes - i;
  char* const a2 = a != nullptr ? a + i : nullptr;
  i += streamingB ? copyLoop<true>(a2, b + i, s + i, rest) : copyLoop<false>(a2, b + i, s + i, rest);
  if (i < bytes) {
    if (a != nullptr) std::memcpy(a + i, s + i, bytes - i);
    std::memcpy(b + i, s + i, bytes - i);
  }
}

}  // namespace copy_detail

inline void segmentCopy(void* dst, const void* src, size_t bytes) {
  copy_detail::copyTo(nullptr, static_cast<char*>(dst), static_cast<const char*>(src), bytes, false);
}

// A result's copy to the caller's buffer, with streaming stores when asked.
inline void resultCopy(void* dst, const void* src, size_t bytes, bool streaming) {
  copy_detail::copyTo(nullptr, static_cast<char*>(dst), static_cast<const char*>(src), bytes, streaming);
}

// Copies src to both a and b, reading it once; b with streaming stores
// when streamB.
inline void segmentCopyTwice(void* a, void* b, const void* src, size_t bytes, bool streamB) {
  copy_detail::copyTo(static_cast<char*>(a), static_cast<char*>(b), static_cast<const char*>(src), bytes, streamB);
}

}  // namespace fairway
