#include "providers/shm/peer_memory.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "providers/shm/shm_copy.h"

namespace fairway {

PeerMemory::PeerMemory(std::vector<pid_t> pids, std::vector<int> nodeRanks)
    : pids_(std::move(pids)), nodeRanks_(std::move(nodeRanks)), views_(pids_.size()), mappings_(pids_) {}

// Nothing the peer published is trusted: a mapping is made only of the
// file it holds under that descriptor with that inode and size
// (PeerMappings::view), and an address outside what was mapped is never
// translated (viewOf).
void PeerMemory::adopt(int peer, int which, const MappableAllocation& a) {
  View& view = views_[peer][which];
  view = View{};
  if (a.id == 0) return;
  char* local = mappings_.view(peer, a);
  if (local != nullptr) view = View{a.base, a.bytes, local};
}

void PeerMemory::beginCall() {
  for (auto& views : views_) views = {};
  mappings_.beginCall();
}

char* PeerMemory::viewOf(int peer, uint64_t remote, size_t bytes) const {
  for (const View& v : views_[peer]) {
    if (v.local != nullptr && remote >= v.base && remote - v.base <= v.bytes && bytes <= v.bytes - (remote - v.base)) {
      return v.local + (remote - v.base);
    }
  }
  return nullptr;
}

Status PeerMemory::read(int peer, void* local, uint64_t remote, size_t bytes) const {
  return transfer(peer, local, remote, bytes, false, false);
}

Status PeerMemory::write(int peer, uint64_t remote, const void* local, size_t bytes, bool streaming) const {
  return transfer(peer, const_cast<void*>(local), remote, bytes, true, streaming);
}

Status PeerMemory::readThrough(int peer, void* local, uint64_t remote, size_t bytes, char* bounce) const {
  if (bounce == nullptr) return read(peer, local, remote, bytes);
  if (const char* view = viewOf(peer, remote, bytes)) {
    resultCopy(local, view, bytes, true);
    return Status::ok();
  }
  char* mine = static_cast<char*>(local);
  for (size_t at = 0; at < bytes; at += kStreamedPieceBytes) {
    const size_t piece = std::min(kStreamedPieceBytes, bytes - at);
    FW_RETURN_IF_ERROR(read(peer, bounce, remote + at, piece));
    resultCopy(mine + at, bounce, piece, true);
  }
  return Status::ok();
}

// The kernel may move fewer bytes than asked (a page boundary it could
// not pin at once): the rest goes in further calls.
Status PeerMemory::transfer(int peer, void* local, uint64_t remote, size_t bytes, bool write,
                            bool streaming) const {
  char* mine = static_cast<char*>(local);
  if (char* view = viewOf(peer, remote, bytes)) {
    if (write) {
      resultCopy(view, mine, bytes, streaming);
    } else {
      segmentCopy(mine, view, bytes);
    }
    return Status::ok();
  }
  while (bytes > 0) {
    iovec here{mine, bytes};
    iovec there{reinterpret_cast<void*>(static_cast<uintptr_t>(remote)), bytes};
    const ssize_t moved = write ? ::process_vm_writev(pids_[peer], &here, 1, &there, 1, 0)
                                : ::process_vm_readv(pids_[peer], &here, 1, &there, 1, 0);
    if (moved <= 0) {
      const int error = moved < 0 ? errno : EIO;
      return Status(fwRemoteError, std::string(write ? "writing to" : "reading") + " rank " +
                                       std::to_string(nodeRanks_[peer]) + "'s buffer (pid " +
                                       std::to_string(pids_[peer]) + "): " + std::strerror(error));
    }
    mine += moved;
    remote += static_cast<uint64_t>(moved);
    bytes -= static_cast<size_t>(moved);
  }
  return Status::ok();
}

}  // namespace fairway
