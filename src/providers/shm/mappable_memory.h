// Host memory that the node's other processes can map: fwHostMemAlloc.
//
// A peer's ordinary buffer is reachable only through the kernel's copy
// (process_vm_readv), which on the project's AMD machine moves 3-4 GB/s
// where a plain copy moves 7.5-8.5. An allocation made here is a memfd of
// its own, mapped shared: a peer that is allowed to (the same ptrace rule
// as the kernel's copy) takes the file with pidfd_getfd, maps it once and
// from then on reads and writes it with plain loads and stores, as fast as
// its own memory. The node's single-copy rounds publish the allocation
// their buffer lies in (shm_node.h, MappableRegion); everything else about
// a call stays as it is, and buffers from anywhere else keep the kernel's
// copy.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/status.h"

namespace fairway {

// One allocation, as its owner describes it to its peers.
struct MappableAllocation {
  uint64_t id = 0;    // unique in its process, never reused; 0: none
  uint64_t base = 0;  // its address in the owner's process
  uint64_t bytes = 0;
  int fd = -1;        // the owner's descriptor of its memfd
  uint64_t inode = 0; // the memfd's, so a peer can tell it took the right file
};

// Allocates bytes (rounded up to whole pages) of mappable host memory.
Status allocateMappable(size_t bytes, void** out);
// Frees an allocation allocateMappable made (its start address); any
// other pointer is an error that changes nothing.
Status freeMappable(void* ptr);
// The allocation that holds [ptr, ptr + bytes) whole, if any.
bool findMappable(const void* ptr, size_t bytes, MappableAllocation* out);
// Whether this process holds any such allocation (a call with none skips
// the lookup).
bool anyMappable();

// The peers' allocations this process has mapped: each taken once from
// its owner (pidfd_getfd of the owner's descriptor, checked against the
// inode the owner published) and mapped whole. A peer whose files cannot
// be taken (no ptrace access, a kernel before 5.6) is not asked again.
// Ids are never reused, so a mapping stays right for its id; an owner's
// freed allocation lives on in its mapping here (its pages too) until the
// cache drops it: past kMostMappings (or four per peer), or past
// kMostIdleBytes of mappings the current call has not used, it drops the
// one used longest ago that the current call has not used. A job that
// keeps more than that in distinct buffers maps some again (correct,
// slower); one that allocates afresh every step keeps at most that much
// of its peers' freed memory alive. Not shared between threads.
class PeerMappings {
 public:
  explicit PeerMappings(std::vector<pid_t> pids) : pids_(std::move(pids)), pidfds_(pids_.size(), -1),
                                                   refused_(pids_.size(), false) {}
  ~PeerMappings();
  PeerMappings(const PeerMappings&) = delete;
  PeerMappings& operator=(const PeerMappings&) = delete;
  // peer's allocation `a` in this process, or nullptr where it cannot be
  // mapped (the caller then takes the kernel's copy).
  char* view(int peer, const MappableAllocation& a);
  // A collective begins: what it views from now on is in use until the
  // next; idle mappings past the limits go now.
  void beginCall() {
    ++call_;
    if (mappings_.size() > mostMappings() || mappedBytes_ > kMostIdleBytes) trim();
  }
  static constexpr size_t kMostMappings = 64;
  static constexpr size_t kMostIdleBytes = size_t{4} << 30;

 private:
  struct Mapping {
    char* local;
    size_t bytes;
    uint64_t used;  // when last viewed, for dropping the one used longest ago
    uint64_t call;  // the call that last viewed it
  };
  // Drops idle mappings, the one used longest ago first, while there are
  // too many or they hold too many bytes.
  void trim();
  size_t mostMappings() const { return std::max(kMostMappings, 4 * pids_.size()); }
  std::vector<pid_t> pids_;
  std::vector<int> pidfds_;
  std::vector<bool> refused_;
  std::map<std::pair<int, uint64_t>, Mapping> mappings_;  // by (peer, id)
  uint64_t views_ = 0;
  uint64_t call_ = 1;
  size_t mappedBytes_ = 0;  // of every mapping
};

}  // namespace fairway
