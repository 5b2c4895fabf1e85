// Point-to-point messages of one communicator. Each message carries the
// caller's tag and a number counted per (pair of ranks, tag) in call order,
// so a receive matches the sender's message of the same tag and number
// whatever order the two sides post in (the device paths post from their
// streams' threads, later than the call). Messages of one tag between one
// pair match in call order (MPI's non-overtaking rule); different tags
// match independently.
//
// A receive from any source finds the next message of its tag from each
// rank, as numbered above, that has arrived and is not yet claimed, and
// receives the first one found: it never takes a message out of its
// sender's order, and a receive posted for that sender later gets the
// next one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "core/status.h"
#include "p2p/messenger.h"
#include "p2p/tags.h"

namespace fairway {

// A receive from any source: set up by the caller, matched by
// PointToPoint::matchAnySource.
struct AnySourceReceive {
  void* buf = nullptr;
  size_t bytes = 0;
  uint32_t tag = 0;
  int source = -1;  // the sender, once matched
  Pending message;  // the receive posted for that sender's message
  bool matched() const { return source >= 0; }
};

class PointToPoint {
 public:
  // The tag of the library's own messages and of fwSend/fwRecv.
  static constexpr uint32_t kDefaultTag = 0;
  static constexpr uint32_t kMaxTag = Tag::kMaxUserTag;

  PointToPoint(Messenger& messenger, int rank, int size) : messenger_(messenger), rank_(rank), size_(size) {}

  // The next message numbers to and from peer under tag, reserved in call
  // order for a message posted later (postSendNumbered/postRecvNumbered).
  uint64_t reserveSendNumber(int peer, uint32_t tag);
  uint64_t reserveRecvNumber(int peer, uint32_t tag);
  // memory: where buf's bytes are (Messenger::send).
  Status postSendNumbered(const void* buf, size_t bytes, int peer, uint32_t tag, uint64_t number, Pending* out,
                          MemoryType memory = MemoryType::Host);
  Status postRecvNumbered(void* buf, size_t bytes, int peer, uint32_t tag, uint64_t number, Pending* out,
                          MemoryType memory = MemoryType::Host);

  // A message posted now, numbered in call order.
  Status postSend(const void* buf, size_t bytes, int peer, uint32_t tag, Pending* out);
  Status postRecv(void* buf, size_t bytes, int peer, uint32_t tag, Pending* out);

  // One attempt to match receive with an arrived message; once matched,
  // receive->message is posted and completes like any receive.
  Status matchAnySource(AnySourceReceive* receive);
  // Matches receive and waits for its data, bounded as every wait is: a
  // failed peer, or FAIRWAY_TIMEOUT_MS with no message of its tag from any
  // rank, ends it with an error.
  Status waitAnySource(AnySourceReceive* receive);

 private:
  static uint64_t key(int peer, uint32_t tag) { return (static_cast<uint64_t>(tag) << 32) | static_cast<uint32_t>(peer); }

  Messenger& messenger_;
  int rank_;
  int size_;
  std::mutex mutex_;  // numbering, and any-source matching against it
  std::unordered_map<uint64_t, uint64_t> sent_;      // next number by key(peer, tag)
  std::unordered_map<uint64_t, uint64_t> received_;  // next number by key(peer, tag)
  int firstProbed_ = 0;  // where the next any-source search starts, so no sender is always last
};

}  // namespace fairway
