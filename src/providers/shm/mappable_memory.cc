#include "providers/shm/mappable_memory.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace fairway {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, MappableAllocation> byBase;  // by start address
  uint64_t nextId = 1;
  std::atomic<size_t> live{0};  // byBase's size, read without the lock
};

// Never destroyed: allocations may be freed while static destructors run.
Registry& registry() {
  static auto* r = new Registry();
  return *r;
}

std::string systemError(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

Status allocateMappable(size_t bytes, void** out) {
  *out = nullptr;
  if (bytes == 0) return Status(fwInvalidArgument, "size is 0");
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (bytes > SIZE_MAX - page) return Status(fwInvalidArgument, "size " + std::to_string(bytes) + " is too large");
  const size_t rounded = (bytes + page - 1) / page * page;
  const int fd = memfd_create("fairway-host-memory", MFD_CLOEXEC);
  if (fd < 0) return Status(fwSystemError, systemError("memfd_create"));
  struct stat st {};
  if (ftruncate(fd, static_cast<off_t>(rounded)) != 0 || fstat(fd, &st) != 0) {
    const Status failed(fwSystemError, systemError("sizing the memfd"));
    close(fd);
    return failed;
  }
  void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const Status failed(fwSystemError, systemError(("mapping " + std::to_string(rounded) + " bytes").c_str()));
    close(fd);
    return failed;
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  MappableAllocation a;
  a.id = r.nextId++;
  a.base = reinterpret_cast<uintptr_t>(p);
  a.bytes = rounded;
  a.fd = fd;
  a.inode = static_cast<uint64_t>(st.st_ino);
  r.byBase.emplace(a.base, a);
  r.live.store(r.byBase.size(), std::memory_order_release);
  *out = p;
  return Status::ok();
}

Status freeMappable(void* ptr) {
  MappableAllocation a;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.byBase.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == r.byBase.end()) {
      return Status(fwInvalidArgument, "ptr was not returned by fwHostMemAlloc (or was freed already)");
    }
    a = it->second;
    r.byBase.erase(it);
    r.live.store(r.byBase.size(), std::memory_order_release);
  }
  // Peers that mapped it keep their mappings until they drop them; the
  // memory goes once the last is gone.
  munmap(ptr, a.bytes);
  close(a.fd);
  return Status::ok();
}

bool anyMappable() { return registry().live.load(std::memory_order_acquire) != 0; }

bool findMappable(const void* ptr, size_t bytes, MappableAllocation* out) {
  const auto at = reinterpret_cast<uintptr_t>(ptr);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.byBase.empty()) return false;
  auto it = r.byBase.upper_bound(at);
  if (it == r.byBase.begin()) return false;
  --it;
  const MappableAllocation& a = it->second;
  if (at - a.base > a.bytes || bytes > a.bytes - (at - a.base)) return false;
  *out = a;
  return true;
}

PeerMappings::~PeerMappings() {
  for (auto& [key, m] : mappings_) munmap(m.local, m.bytes);
  for (int fd : pidfds_) {
    if (fd >= 0) close(fd);
  }
}

char* PeerMappings::view(int peer, const MappableAllocation& a) {
  if (a.id == 0 || peer < 0 || static_cast<size_t>(peer) >= pids_.size() || refused_[peer]) return nullptr;
  const auto key = std::make_pair(peer, a.id);
  auto it = mappings_.find(key);
  if (it != mappings_.end()) {
    it->second.used = ++views_;
    it->second.call = call_;
    return it->second.bytes == a.bytes ? it->second.local : nullptr;
  }
  if (pidfds_[peer] < 0) {
    pidfds_[peer] = static_cast<int>(syscall(SYS_pidfd_open, pids_[peer], 0));
    if (pidfds_[peer] < 0) {
      refused_[peer] = true;
      return nullptr;
    }
  }
  const int fd = static_cast<int>(syscall(SYS_pidfd_getfd, pidfds_[peer], a.fd, 0));
  if (fd < 0) {
    if (errno == EPERM || errno == ENOSYS || errno == ESRCH) refused_[peer] = true;
    return nullptr;
  }
  struct stat st {};
  void* local = MAP_FAILED;
  // The descriptor the owner published may, in a call that misbehaves, be
  // another file: only the memfd it described is mapped.
  if (fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_ino) == a.inode &&
      static_cast<uint64_t>(st.st_size) == a.bytes) {
    local = mmap(nullptr, a.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  }
  close(fd);
  if (local == MAP_FAILED) return nullptr;
  mappings_.emplace(key, Mapping{static_cast<char*>(local), a.bytes, ++views_, call_});
  mappedBytes_ += a.bytes;
  trim();
  return static_cast<char*>(local);
}

void PeerMappings::trim() {
  for (;;) {
    size_t idleBytes = 0;
    auto oldest = mappings_.end();
    for (auto it = mappings_.begin(); it != mappings_.end(); ++it) {
      if (it->second.call == call_) continue;  // the current call may still use it
      idleBytes += it->second.bytes;
      if (oldest == mappings_.end() || it->second.used < oldest->second.used) oldest = it;
    }
    if (oldest == mappings_.end() || (mappings_.size() <= mostMappings() && idleBytes <= kMostIdleBytes)) return;
    munmap(oldest->second.local, oldest->second.bytes);
    mappedBytes_ -= oldest->second.bytes;
    mappings_.erase(oldest);
  }
}

}  // namespace fairway
