// fairway-trace --status PID: what a running process's communicators are
// doing, read from the dump it writes on FAIRWAY_TRACE_SIGNAL: for each,
// the last collective completed, the calls in flight and since when, and
// the rank its idling wait waits on.
#pragma once

#include <string>

#include "trace/trace_dump.h"

namespace fairway {

// The status as text; nowNs: the time to measure "ago" from.
std::string describeStatus(const TraceDump& dump, uint64_t nowNs);

}  // namespace fairway
