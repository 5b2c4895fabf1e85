// How a rank waiting for a peer spends an empty poll, and how often a
// long wait looks at its peers' health: shared by the Messenger's waits
// on the transports and the shared-memory provider's waits on the segment.
#pragma once

#include <sched.h>

namespace fairway {

// Every 50 ms of a blocked wait, the peers' health is checked.
constexpr int kHealthCheckIntervalMs = 50;

// Gives the core away when the host runs more ranks than it has CPUs (the
// peer being waited for may need it), else only eases the spin.
inline void idlePoll(bool yieldCore) {
  if (yieldCore) {
    sched_yield();
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace fairway
