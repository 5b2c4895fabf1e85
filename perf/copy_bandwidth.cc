// Single-core memcpy bandwidth, the yardstick for a node's shared-memory
// collectives: scripts/compare.sh runs it beside the libraries and reports
// 2-rank allreduce busbw against it. Prints one line: bytes and GB/s
// (bytes copied per second), the median of several timed windows.
//   copy_bandwidth [BYTES] (default 64M; K, M, G suffixes)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/command_line_numbers.h"

int main(int argc, char** argv) {
  size_t bytes = size_t{64} << 20;
  if (argc > 2 || (argc == 2 && !fairway::parseSize(argv[1], &bytes)) || bytes == 0) {
    std::fprintf(stderr, "usage: %s [BYTES]  (default 64M; K, M, G suffixes)\n", argv[0]);
    return 2;
  }
  std::vector<char> from(bytes, 1), to(bytes, 2);  // touched: no page faults in the windows
  std::memcpy(to.data(), from.data(), bytes);
  // Each window copies at least 1 GiB, so it lasts a good fraction of a second.
  const size_t copies = std::max<size_t>(1, (size_t{1} << 30) / bytes);
  std::vector<double> rates;
  for (int window = 0; window < 7; ++window) {
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < copies; ++i) {
      std::memcpy(to.data(), from.data(), bytes);
      from[i % bytes] = static_cast<char>(i);  // every copy is needed
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rates.push_back(static_cast<double>(bytes) * static_cast<double>(copies) / seconds / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  std::printf("%zu %.3f\n", bytes, rates[rates.size() / 2]);
  volatile char last = to[bytes - 1];  // the copies are observed
  (void)last;
  return 0;
}
