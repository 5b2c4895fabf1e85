// A cache line's round trip between two cores, measured by two threads or
// processes handing a counter back and forth (the shared-memory node's
// probe at creation: SharedMemoryNode::measureRoundTripNs).
#pragma once

#include <atomic>
#include <cstdint>

namespace fairway {

// One side of the measurement; the other side calls it at about the same
// time with the two counters swapped and the other `serves`. Both start at
// 0. The server stores each trip's number in `mine` and waits for the
// other side to return it in its own; each side times batches of trips,
// and the least batch mean is its answer. A batch in which a trip found
// the other side not running (it yields the core then, which the other
// may be waiting for) does not count; the server goes on until enough
// batches ran whole or boundMs passed, then stores the end, which stops
// the other side. 0 when no batch ran whole: each side gives up alone
// at boundMs, so neither waits longer whatever the other does.
uint32_t handLineRoundTripNs(std::atomic<uint32_t>& mine, const std::atomic<uint32_t>& theirs, bool serves,
                             int boundMs);

}  // namespace fairway
