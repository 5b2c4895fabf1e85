#include "providers/shm/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "p2p/peer_info.h"

namespace fairway {
namespace {

constexpr const char* kShmDir = "/dev/shm";

std::string errnoText(int error) { return std::strerror(error); }

std::string freeSpaceText() {
  struct statvfs vfs {};
  if (::statvfs(kShmDir, &vfs) != 0) return std::string("an unknown amount (") + errnoText(errno) + ")";
  return std::to_string(static_cast<unsigned long long>(vfs.f_bavail) * vfs.f_frsize) + " bytes";
}

Status noRoom(size_t bytes, const std::string& why) {
  return Status(fwSystemError, "the node's shared-memory segment needs " + std::to_string(bytes) + " bytes but " +
                                   kShmDir + " has " + freeSpaceText() + " free (" + why +
                                   "); FAIRWAY_SHM_CHUNK_BYTES sets its size");
}

// "fairway-PID-SERIAL-RANDOM": PID says whose it is (for the sweep of
// leftovers), RANDOM makes the name unguessable by other users.
std::string freshName() {
  static std::atomic<unsigned> serial{0};
  unsigned char random[8] = {};
  if (getrandom(random, sizeof(random), 0) != static_cast<ssize_t>(sizeof(random))) {
    const uint64_t fallback = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&serial)) ^ static_cast<uint64_t>(::getpid());
    std::memcpy(random, &fallback, sizeof(random));
  }
  char text[96];
  std::snprintf(text, sizeof(text), "/%s%d-%u-%02x%02x%02x%02x%02x%02x%02x%02x", kShmNamePrefix,
                static_cast<int>(::getpid()), serial.fetch_add(1), random[0], random[1], random[2], random[3],
                random[4], random[5], random[6], random[7]);
  return text;
}

// Segments are unlinked once every local rank has mapped them; one whose
// creator died inside that window (milliseconds at communicator creation)
// is removed by the next creation on the host under the same user.
void unlinkLeftovers() {
  DIR* dir = ::opendir(kShmDir);
  if (dir == nullptr) return;
  const size_t prefix = std::strlen(kShmNamePrefix);
  while (dirent* entry = ::readdir(dir)) {
    if (std::strncmp(entry->d_name, kShmNamePrefix, prefix) != 0) continue;
    const long pid = std::strtol(entry->d_name + prefix, nullptr, 10);
    if (pid <= 0 || !processHasExited(static_cast<int32_t>(pid))) continue;
    struct stat st {};
    const std::string path = std::string(kShmDir) + "/" + entry->d_name;
    if (::stat(path.c_str(), &st) == 0 && st.st_uid == ::geteuid()) {
      (void)::shm_unlink((std::string("/") + entry->d_name).c_str());
    }
  }
  ::closedir(dir);
}

Status mapShared(int fd, size_t bytes, void** out) {
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return Status(fwSystemError, "mmap of the node's shared-memory segment: " + errnoText(errno));
  *out = base;
  return Status::ok();
}

}  // namespace

ShmSegment::~ShmSegment() { release(); }

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    release();
    base_ = other.base_;
    bytes_ = other.bytes_;
    name_ = std::move(other.name_);
    linked_ = other.linked_;
    other.base_ = nullptr;
    other.bytes_ = 0;
    other.linked_ = false;
  }
  return *this;
}

void ShmSegment::release() {
  unlink();
  if (base_ != nullptr) ::munmap(base_, bytes_);
  base_ = nullptr;
  bytes_ = 0;
}

void ShmSegment::unlink() {
  if (linked_) (void)::shm_unlink(name_.c_str());
  linked_ = false;
}

Status ShmSegment::create(size_t bytes, ShmSegment* out) {
  unlinkLeftovers();
  struct statvfs vfs {};
  if (::statvfs(kShmDir, &vfs) == 0 && static_cast<unsigned long long>(vfs.f_bavail) * vfs.f_frsize < bytes) {
    return noRoom(bytes, "checked before creating it");
  }
  ShmSegment segment;
  segment.name_ = freshName();
  const int fd = ::shm_open(segment.name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status(fwSystemError, "shm_open of " + segment.name_ + ": " + errnoText(errno));
  segment.linked_ = true;
  // Reserves the pages: on a full tmpfs this fails now with ENOSPC.
  const int reserved = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  Status st;
  if (reserved != 0) {
    st = reserved == ENOSPC ? noRoom(bytes, "posix_fallocate: " + errnoText(reserved))
                            : Status(fwSystemError, "posix_fallocate of the node's shared-memory segment: " +
                                                        errnoText(reserved));
  }
  if (st.isOk()) st = mapShared(fd, bytes, &segment.base_);
  ::close(fd);
  if (!st.isOk()) return st;  // segment's destructor unlinks the name
  segment.bytes_ = bytes;
  *out = std::move(segment);
  return Status::ok();
}

Status ShmSegment::open(const std::string& name, size_t bytes, ShmSegment* out) {
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return Status(fwSystemError, "shm_open of the node's segment " + name + ": " + errnoText(errno));
  struct stat st {};
  Status status;
  if (::fstat(fd, &st) != 0) {
    status = Status(fwSystemError, "fstat of the node's segment " + name + ": " + errnoText(errno));
  } else if (static_cast<size_t>(st.st_size) < bytes) {
    status = Status(fwInvalidUsage, "the node's segment " + name + " holds " + std::to_string(st.st_size) +
                                        " bytes where this rank needs " + std::to_string(bytes) +
                                        ": are FAIRWAY_SHM_CHUNK_BYTES and the rank count the same on every rank?");
  }
  ShmSegment segment;
  if (status.isOk()) status = mapShared(fd, bytes, &segment.base_);
  ::close(fd);
  if (!status.isOk()) return status;
  segment.bytes_ = bytes;
  segment.name_ = name;
  *out = std::move(segment);
  return Status::ok();
}

}  // namespace fairway
