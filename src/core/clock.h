// The monotonic clock every bounded wait measures against, and deadlines
// on it (in milliseconds, as FAIRWAY_TIMEOUT_MS and the sockets' polls
// take them).
#pragma once

#include <chrono>
#include <climits>
#include <cstdint>

namespace fairway {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline deadlineAfterMs(int64_t ms) { return Clock::now() + std::chrono::milliseconds(ms); }

// Milliseconds left until deadline: 0 once past it, at most INT_MAX.
inline int msUntil(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > INT_MAX ? INT_MAX : static_cast<int>(left);
}

}  // namespace fairway
