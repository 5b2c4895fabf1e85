// Reaching the memory of the node's other processes. A peer's buffer is
// read or written through the kernel's copy (process_vm_readv and
// process_vm_writev, Linux cross-memory attach: allowed with ptrace access
// to the peer), or, where it lies in an allocation the peer published for
// the current call and this process has mapped (mappable_memory.h), with
// plain loads and stores on the mapping.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "providers/shm/mappable_memory.h"

namespace fairway {

class PeerMemory {
 public:
  // pids: the node's processes, by local rank; nodeRanks: their
  // communicator ranks, for messages.
  PeerMemory(std::vector<pid_t> pids, std::vector<int> nodeRanks);

  // peer's allocation `a` (id 0: none) holds the buffer of slot `which`
  // (0: its published buffer, 1: its result) that this call reaches: it
  // is mapped here (once per allocation) and serves the copies below.
  void adopt(int peer, int which, const MappableAllocation& a);
  // A call's first step: drops every slot's allocation, as an earlier
  // call's address range may be another buffer's now.
  void beginCall();
  // peer's bytes [remote, remote + bytes) in this process, where they lie
  // whole in an adopted allocation; nullptr otherwise.
  char* viewOf(int peer, uint64_t remote, size_t bytes) const;

  // Copies bytes at remote (peer's address space) to local, or local to
  // remote: plain copies where viewOf has them (a write with streaming
  // stores when asked), else the kernel's.
  Status read(int peer, void* local, uint64_t remote, size_t bytes) const;
  Status write(int peer, uint64_t remote, const void* local, size_t bytes, bool streaming = false) const;
  // read, or with a bounce buffer (of kStreamedPieceBytes) for a
  // destination that streams: the kernel's copy stores through the cache,
  // reading every destination line first, so there the bytes land piece
  // by piece in the bounce buffer, which stays in the cache, and go on to
  // local with streaming stores (a mapped buffer streams straight).
  Status readThrough(int peer, void* local, uint64_t remote, size_t bytes, char* bounce) const;
  // All-to-all out of place on 2 cores, the rank's own block streamed
  // too, medians of 6 runs in ABBA order, us a call: 4 ranks 16 MiB
  // 10,690 to 8,430, 64 MiB 44,040 to 34,370; 8 ranks 16 MiB 21,270 to
  // 19,170, 64 MiB 87,930 to 70,870. Pieces of 64 KiB ran 6-7% slower in
  // one interleaved run (a system call a piece).
  static constexpr size_t kStreamedPieceBytes = size_t{256} << 10;

 private:
  Status transfer(int peer, void* local, uint64_t remote, size_t bytes, bool write, bool streaming) const;
  struct View {
    uint64_t base = 0, bytes = 0;
    char* local = nullptr;  // null: none
  };
  std::vector<pid_t> pids_;
  std::vector<int> nodeRanks_;
  std::vector<std::array<View, 2>> views_;  // [peer][which]
  PeerMappings mappings_;
};

}  // namespace fairway
