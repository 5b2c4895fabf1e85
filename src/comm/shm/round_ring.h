// Where each round's input goes in a rank's input area, a ring of two
// chunks.
//
// Why not always the two halves: a store to a line that another core
// still holds (the peer that read the round before last there) first takes
// the line away from that core, a round trip between the cores for every
// line. Walking a round's piece around the whole ring lets a region cool
// down: before it is written again its reader has read the rest of the
// ring, so its copies have left and the stores find the lines unshared
// (2-rank allgather of 128 and 256 KiB: 6.1 to 5.6 and 11.6 to 10.1 us).
// Only a node of two ranks walks: with more readers (here also more ranks
// than cores) walking measured slower (4-rank allgather of 128 KiB: 13.6
// to 14.6 us) or the same.
//
// The rule that keeps it safe: a rank fills round g's region while a peer
// may still read round g - 1's (not g - 2's: beginRound waits for that), so
// consecutive regions never overlap. Each round takes a slot: the chunk,
// or when walking, the chunk halved while the round still fits and the
// half stays a whole number of cache lines; at a multiple of its own size,
// the first such place after the last round's region, else the ring's
// start. Slot sizes divide one another, so the start is free whenever the
// place after the last region does not fit (test_round_ring.cc).
#pragma once

#include <cstddef>

namespace fairway {

class RoundRing {
 public:
  // Smaller rounds keep to the ring's two halves even when walking: their
  // few lines stay in both cores' caches from one call to the next, and
  // walking them measured slower (2-rank allreduce of 128 B-1 KiB 0.28-0.39
  // to 0.32-0.41 us, of 16 KiB 1.86 to 2.12), while from here on it wins.
  static constexpr size_t kWalkFromBytes = 32 * 1024;

  // chunkBytes: the most one round holds; the ring has two of them.
  // walk: whether rounds of kWalkFromBytes and more walk the ring.
  RoundRing(size_t chunkBytes, bool walk) : chunkBytes_(chunkBytes), walk_(walk) {}

  // Places the next round, of `bytes` (at most a chunk), and returns its
  // offset. A round of 0 bytes takes no place and moves nothing.
  size_t place(size_t bytes) {
    if (bytes == 0) return at_;
    size_t slot = chunkBytes_;
    if (walk_ && bytes >= kWalkFromBytes) {
      while (slot % 128 == 0 && bytes <= slot / 2) slot /= 2;
    }
    size_t at = (end_ + slot - 1) / slot * slot;
    if (at + slot > 2 * chunkBytes_) at = 0;
    at_ = at;
    end_ = at + bytes;
    return at_;
  }
  // The offset of the round placed last.
  size_t at() const { return at_; }

 private:
  size_t chunkBytes_;
  bool walk_;
  size_t at_ = 0;  // the last round's region: [at_, end_)
  size_t end_ = 0;
};

}  // namespace fairway
