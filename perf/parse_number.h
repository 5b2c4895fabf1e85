// Strict parsers for the numbers the perf binaries and their peers take on
// the command line: a value with anything left over is refused, never
// silently cut short ("1M" read as 1 byte).
#pragma once

#include <cstddef>
#include <cstdlib>

namespace fairway::perf {

// Bytes, with an optional K, M or G suffix (powers of 1024), as nccl-tests.
inline bool parseSize(const char* text, size_t* out) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text || v < 0) return false;
  switch (*end) {
    case 'K': case 'k': v *= 1024; ++end; break;
    case 'M': case 'm': v *= 1024 * 1024; ++end; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; ++end; break;
    default: break;
  }
  if (*end != '\0') return false;
  *out = static_cast<size_t>(v);
  return true;
}

// A count from 0 to 100 million.
inline bool parseInt(const char* text, int* out) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 0 || v > 100000000) return false;
  *out = static_cast<int>(v);
  return true;
}

inline bool parseFactor(const char* text, double* out) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text || *end != '\0') return false;
  *out = v;
  return true;
}

}  // namespace fairway::perf
