#include "p2p/point_to_point.h"

#include <string>

namespace fairway {

uint64_t PointToPoint::reserveSendNumber(int peer, uint32_t tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  return sent_[key(peer, tag)]++;
}

uint64_t PointToPoint::reserveRecvNumber(int peer, uint32_t tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  return received_[key(peer, tag)]++;
}

Status PointToPoint::postSendNumbered(const void* buf, size_t bytes, int peer, uint32_t tag, uint64_t number,
                                      Pending* out, MemoryType memory) {
  return messenger_.send(peer, buf, bytes, Tag::pointToPoint(rank_, tag, number), out, memory);
}

Status PointToPoint::postRecvNumbered(void* buf, size_t bytes, int peer, uint32_t tag, uint64_t number,
                                      Pending* out, MemoryType memory) {
  return messenger_.recv(peer, buf, bytes, Tag::pointToPoint(peer, tag, number), out, memory);
}

Status PointToPoint::postSend(const void* buf, size_t bytes, int peer, uint32_t tag, Pending* out) {
  return postSendNumbered(buf, bytes, peer, tag, reserveSendNumber(peer, tag), out);
}

Status PointToPoint::postRecv(void* buf, size_t bytes, int peer, uint32_t tag, Pending* out) {
  return postRecvNumbered(buf, bytes, peer, tag, reserveRecvNumber(peer, tag), out);
}

Status PointToPoint::matchAnySource(AnySourceReceive* receive) {
  if (receive->matched()) return Status::ok();
  int source = -1;
  uint64_t number = 0;
  {
    // Under the numbering lock: a receive for one sender reserves its
    // number here too, so no message is claimed twice.
    std::lock_guard<std::mutex> lock(mutex_);
    for (int i = 0; i < size_ && source < 0; ++i) {
      const int peer = (firstProbed_ + i) % size_;
      const uint64_t next = received_[key(peer, receive->tag)];
      if (messenger_.arrived(peer, Tag::pointToPoint(peer, receive->tag, next))) {
        source = peer;
        number = next;
        received_[key(peer, receive->tag)] = next + 1;
      }
    }
    if (source < 0) return Status::ok();
    firstProbed_ = (source + 1) % size_;
  }
  receive->source = source;
  return postRecvNumbered(receive->buf, receive->bytes, source, receive->tag, number, &receive->message);
}

Status PointToPoint::waitAnySource(AnySourceReceive* receive) {
  auto poll = [&](bool* finished) {
    Status st = matchAnySource(receive);
    *finished = receive->matched();
    return st;
  };
  auto timedOut = [&] {
    return Status(fwTimeout, "no rank sent a message with tag " + std::to_string(receive->tag) + " to rank " +
                                 std::to_string(rank_) + " within FAIRWAY_TIMEOUT_MS=" +
                                 std::to_string(messenger_.timeoutMs()) + " ms (receive from any source)");
  };
  FW_RETURN_IF_ERROR(messenger_.waitUntil(poll, timedOut));
  return messenger_.wait(&receive->message);
}

}  // namespace fairway
