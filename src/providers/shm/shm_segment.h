// One node's shared-memory segment: a POSIX shared-memory object in
// /dev/shm that the node's leader creates and every local rank maps. The
// leader unlinks it as soon as every local rank has mapped it, so no file
// outlives the communicator however its processes end (normal exit, abort,
// SIGKILL): the memory lives only as long as some rank maps it.
#pragma once

#include <cstddef>
#include <string>

#include "core/status.h"

namespace fairway {

class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ShmSegment(ShmSegment&& other) noexcept { *this = std::move(other); }
  ShmSegment& operator=(ShmSegment&& other) noexcept;

  // Creates and maps a new segment of `bytes` zeroed bytes under a fresh
  // name (owner-only, never an existing object). The memory is reserved
  // now (posix_fallocate), so a full /dev/shm is an error here, naming the
  // size and the free space, never a SIGBUS later. Also unlinks objects
  // this user left behind from processes that no longer exist.
  static Status create(size_t bytes, ShmSegment* out);
  // Maps the segment the leader created; it must hold at least `bytes`.
  static Status open(const std::string& name, size_t bytes, ShmSegment* out);

  // Removes the name; the mappings stay valid. Idempotent.
  void unlink();
  char* data() const { return static_cast<char*>(base_); }
  size_t size() const { return bytes_; }
  const std::string& name() const { return name_; }
  bool mapped() const { return base_ != nullptr; }

 private:
  void release();

  void* base_ = nullptr;
  size_t bytes_ = 0;
  std::string name_;
  bool linked_ = false;  // this process created it and has not unlinked it yet
};

// The names this library gives its segments: "fairway-PID-..." in /dev/shm.
constexpr const char* kShmNamePrefix = "fairway-";

}  // namespace fairway
