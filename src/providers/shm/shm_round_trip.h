// A cache line's round trip between two cores, measured by two threads or
// processes handing a counter back and forth (the shared-memory node's
// probe at creation: SharedMemoryNode::measureRoundTripNs).
#pragma once

#include <atomic>
#include <cstdint>

namespace fairway {

// One side of the measurement; the other side calls it at about the same
// time with the two counters swapped and the other `serves`. Both start at
// 0 and count the trips. The server stores each trip's number in `mine`
// and waits for the other side to return it in its own; a batch's mean is
// timed on each side, and the least of the batches' means is the answer,
// so that a batch the scheduler cut into does not count. 0 when the other
// side has not answered within boundMs: each side gives up alone, so
// neither waits longer whatever the other does.
uint32_t handLineRoundTripNs(std::atomic<uint32_t>& mine, const std::atomic<uint32_t>& theirs, bool serves,
                             int boundMs);

}  // namespace fairway
