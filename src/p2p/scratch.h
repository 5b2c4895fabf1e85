// Per-communicator memory that algorithms reuse from call to call, so the
// steady state allocates nothing. Grow-only; one collective uses it at a time.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "p2p/message_port.h"

namespace fairway {

class Scratch {
 public:
  // At least size bytes of 64-byte aligned memory for an algorithm's own
  // use, valid until the next call.
  void* bytes(size_t size) { return algorithm_.get(size); }
  // A second region, for the collective layer to stage data it hands to an
  // algorithm (which may then call bytes() freely).
  void* staging(size_t size) { return staging_.get(size); }

  // For a composite algorithm (two-phase): memory and in-flight operations
  // of its own, which stay valid while the algorithms it runs inside use
  // bytes() and pendings().
  void* outerBytes(size_t size) { return outer_.get(size); }
  // A hierarchical algorithm's rail buffers (beside its outer memory).
  void* railBytes(size_t size) { return rail_.get(size); }
  Pending* outerPendings(size_t count) { return fresh(&outerPendings_, count); }

  // Calls f(list, count) for every Pending slot handed out so far, for
  // cancelling what a failed collective left in flight.
  template <typename F>
  void forEachPendingList(F f) {
    f(pendings_.data(), pendings_.size());
    f(outerPendings_.data(), outerPendings_.size());
  }

  // count Pending slots, all marked done, valid until the next call.
  Pending* pendings(size_t count) { return fresh(&pendings_, count); }

 private:
  static Pending* fresh(std::vector<Pending>* list, size_t count) {
    if (list->size() < count) list->resize(count);
    for (size_t i = 0; i < count; ++i) (*list)[i] = Pending{};
    return list->data();
  }

  class Region {
   public:
    void* get(size_t size) {
      if (size > capacity_) {
        size_t rounded = (size + 63) / 64 * 64;
        void* fresh = std::aligned_alloc(64, rounded);
        if (fresh == nullptr) throw std::bad_alloc();
        buffer_.reset(static_cast<char*>(fresh));
        capacity_ = rounded;
      }
      return buffer_.get();
    }

   private:
    struct FreeDeleter { void operator()(char* p) const { std::free(p); } };
    std::unique_ptr<char, FreeDeleter> buffer_;
    size_t capacity_ = 0;
  };
  Region algorithm_;
  Region staging_;
  Region outer_;
  Region rail_;
  std::vector<Pending> pendings_;
  std::vector<Pending> outerPendings_;
};

}  // namespace fairway
