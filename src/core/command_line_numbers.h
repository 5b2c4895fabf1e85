// Strict parsers for the numbers the perf binaries, their peers,
// fairwayrun and fairway-sim take on the command line: a value with anything left over, or
// none at all, is refused, never silently cut short ("1M" read as 1 byte).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdlib>

namespace fairway {

// A finite number at the start of text; *end is left after it.
inline bool parseLeadingNumber(const char* text, double* out, const char** end) {
  char* stop = nullptr;
  *out = std::strtod(text, &stop);
  *end = stop;
  return stop != text && std::isfinite(*out);
}

// Bytes, with an optional K, M or G suffix (powers of 1024), as nccl-tests.
inline bool parseSize(const char* text, size_t* out) {
  double v = 0;
  const char* end = nullptr;
  if (!parseLeadingNumber(text, &v, &end) || v < 0) return false;
  switch (*end) {
    case 'K': case 'k': v *= 1024; ++end; break;
    case 'M': case 'm': v *= 1024 * 1024; ++end; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; ++end; break;
    default: break;
  }
  if (*end != '\0' || v >= 0x1p63) return false;
  *out = static_cast<size_t>(v);
  return true;
}

inline bool parseFactor(const char* text, double* out) {
  const char* end = nullptr;
  return parseLeadingNumber(text, out, &end) && *end == '\0';
}

// A whole number in [minValue, maxValue].
inline bool parseInt(const char* text, int* out, long minValue = 0, long maxValue = 100000000) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < minValue || v > maxValue) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace fairway
