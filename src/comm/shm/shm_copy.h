// Copies into and out of the node's segment. glibc's memcpy moves blocks
// of 2 KiB to 128 KiB with `rep movsb`, which on the reference machine (an
// AMD EPYC guest) runs at about 2 GB/s where a loop of 16-byte vector
// moves reaches 25 GB/s; every round here copies blocks of exactly those
// sizes, so they take the loop (SSE2: every x86-64 CPU has it).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace fairway {

inline void segmentCopy(void* dst, const void* src, size_t bytes) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  size_t i = 0;
#if defined(__x86_64__)
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
#endif
  if (i < bytes) std::memcpy(d + i, s + i, bytes - i);
}

// segmentCopy for results bound for a large buffer the collective will
// not read again: stores that bypass the cache (no read of the
// destination's lines first, nothing evicted from the segment).
inline void streamingCopy(void* dst, const void* src, size_t bytes) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
#if defined(__x86_64__)
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  size_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  // Streaming stores are weakly ordered: complete them before whatever
  // follows (a phase a peer reads) becomes visible.
  _mm_sfence();
  if (i < bytes) std::memcpy(d + i, s + i, bytes - i);
#else
  std::memcpy(d, s, bytes);
#endif
}

inline void resultCopy(void* dst, const void* src, size_t bytes, bool streaming) {
  if (streaming) {
    streamingCopy(dst, src, bytes);
  } else {
    segmentCopy(dst, src, bytes);
  }
}

// Copies src to both a and b, reading it once; b with streaming stores
// when streamB.
inline void segmentCopyTwice(void* a, void* b, const void* src, size_t bytes, bool streamB) {
  char* x = static_cast<char*>(a);
  char* y = static_cast<char*>(b);
  const char* s = static_cast<const char*>(src);
  size_t i = 0;
#if defined(__x86_64__)
  if (streamB) {
    // Up to b's first 16-byte boundary with ordinary stores.
    i = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(y) % 16) % 16);
    std::memcpy(x, s, i);
    std::memcpy(y, s, i);
  }
  for (; i + 32 <= bytes; i += 32) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(x + i), v);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(x + i + 16), w);
    if (streamB) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(y + i), v);
      _mm_stream_si128(reinterpret_cast<__m128i*>(y + i + 16), w);
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), v);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i + 16), w);
    }
  }
  if (streamB) _mm_sfence();
#endif
  if (i < bytes) {
    std::memcpy(x + i, s + i, bytes - i);
    std::memcpy(y + i, s + i, bytes - i);
  }
}

}  // namespace fairway
