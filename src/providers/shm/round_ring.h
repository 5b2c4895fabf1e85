// Where each round's input goes in a rank's input area, a ring of two
// chunks with some slack.
//
// Why not always the two halves: a store to a line that another core
// still holds (the peer that read the round before last there) first takes
// the line away from that core, a round trip between the cores for every
// line. Walking a round's piece around the whole ring lets a region cool
// down: before it is written again its reader has read the rest of the
// ring, so its copies have left and the stores find the lines unshared
// (2-rank allgather of 128 and 256 KiB: 6.1 to 5.6 and 11.6 to 10.1 us).
// Only a node of two ranks walks by default: with more readers (here also
// more ranks than cores) walking measured slower (4-rank allgather of 128
// KiB: 13.6 to 14.6 us) or the same. A broadcast's rounds walk at every
// size and rank count (place()'s walkAnySize): its root, which no reader
// waits for, then runs ahead (shm_collectives.cc).
//
// The rule that keeps it safe: a rank fills round g's region while a peer
// may still read round g - 1's, so consecutive regions never overlap; and
// the ring names the latest earlier round that used any of the region's
// bytes (at most g - 2), whose readers beginRound waits for. A round
// reusing the bytes of g - 2 waits as a two-buffer scheme would; one whose
// region walked on from bytes used long ago does not wait at all, which is
// what lets a broadcast's root run many rounds ahead of its readers. Each
// round takes a slot: the chunk, or when walking, the chunk halved while
// the round still fits, the half stays a whole number of cache lines and
// no smaller than the unit; at a multiple of its own size, the first such
// place after the last round's region, else the ring's start. Slot sizes
// divide one another, so the start is free whenever the place after the
// last region does not fit (test_round_ring.cc). A round sent back to the
// start early (place()'s span) goes there only when the last round's
// region begins past its slot.
//
// The slack: a round of copies (allgather, broadcast) starts up to
// kSlackBytes - 1 bytes into its region, at its destination's offset from
// a cache line, so that source and destination lines coincide and the
// copies run on whole aligned vectors. (User buffers from malloc sit 16
// bytes past a line; against the segment's lines that cost 2-rank
// allgather of 128 KiB 5.6 against 5.0 us.) So every place of the
// smallest slot, the unit, is followed by kSlackBytes no region starts
// in: the offsets above are virtual, and a region at virtual offset v
// lies at v + kSlackBytes * (v / unit). A region holds its bytes plus the
// slack, and one after it in the ring starts at least a unit later, so
// past that slack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fairway {

// Whether this machine's CPUs are Intel's. The shared-memory defaults were
// measured on two kinds of machine, Intel Xeon and AMD EPYC guests, which
// differ in what taking a line from another core and the kernel's
// cross-process copy cost; where the two disagreed, a default says which
// is which.
inline bool cpuIsIntel() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_is("intel");
#else
  return false;
#endif
}

class RoundRing {
 public:
  // Smaller rounds keep to the ring's two halves even when walking: their
  // few lines stay in both cores' caches from one call to the next. Where
  // walking starts to win depends on what taking a line from another core
  // costs. On the reference machine (AMD EPYC) from 32 KiB: walking
  // smaller rounds measured slower (2-rank allreduce of 128 B-1 KiB
  // 0.28-0.39 to 0.32-0.41 us, of 16 KiB 1.86 to 2.12). On Intel Xeon
  // (Emerald Rapids guests) from 4 KiB: 2-rank allreduce of 4, 8 and 16 KiB
  // 1.84, 3.05, 5.48 us halves against 1.57, 2.40, 4.36 walking,
  // reduce-scatter 8-16 KiB 10-13% faster, broadcast of 8 KiB 1.33 to
  // 1.17; from 2 KiB a 2 KiB broadcast slowed from 0.54 to 0.94 us.
  static constexpr size_t kWalkFromBytes = 32 * 1024;
  static constexpr size_t kWalkFromBytesIntel = 4 * 1024;
  // This machine's: kWalkFromBytesIntel on Intel CPUs, else kWalkFromBytes.
  static size_t walkFromBytesHere() { return cpuIsIntel() ? kWalkFromBytesIntel : kWalkFromBytes; }

  // A round may start this many bytes into its region, less one.
  static constexpr size_t kSlackBytes = 64;

  // place()'s span for rounds whose lines should stay in a core's cache
  // from one call to the next (see place()); kWholeRing walks it all.
  static constexpr size_t kNearSpanBytes = 512 * 1024;
  static constexpr size_t kWholeRing = ~size_t{0};

  // chunkBytes: the most one round holds; the ring has two of them.
  // walk: whether rounds of walkFromBytes and more walk the ring.
  RoundRing(size_t chunkBytes, bool walk, size_t walkFromBytes = kWalkFromBytes)
      : chunkBytes_(chunkBytes), walk_(walk), walkFrom_(walkFromBytes), unit_(smallestSlot(chunkBytes, walkFromBytes)),
        lastRound_(2 * chunkBytes / unit_, kNoRound) {}

  // The input area a ring of these parameters needs: two chunks and the
  // slack after each unit. The unit is the same whether rounds walk or not
  // (place()'s walkAnySize walks any ring).
  static size_t areaBytes(size_t chunkBytes, size_t walkFromBytes = kWalkFromBytes) {
    return 2 * chunkBytes + kSlackBytes * (2 * chunkBytes / smallestSlot(chunkBytes, walkFromBytes));
  }

  // Places round `round`, of `bytes` (at most a chunk), and returns its
  // offset; the round may use up to kSlackBytes past bytes. A round of 0
  // bytes takes no place and moves nothing. spanBytes: a round whose slot
  // is at most half of it walks back to the start past that far into the
  // ring (where the last round left the start free). Measured with 1 MiB
  // chunks at 2 ranks, out-of-place busbw: walking the 2 MiB ring rather
  // than 512 KiB of it ran allgather of 128-512 KiB 1.28-1.49x faster (the
  // stores find cooler lines) and reduce-scatter of 64-128 KiB 0.70x,
  // allreduce 0.85-0.93x (their peers' inputs and results leave the cache).
  // walkAnySize: this round walks in slots down to the unit whatever the
  // ring's walk and size say (a broadcast's: see shm_collectives.cc).
  size_t place(size_t bytes, size_t spanBytes, uint32_t round, bool walkAnySize = false) {
    reused_ = false;
    if (bytes == 0) return at_;
    const size_t slot = walkAnySize ? halvedSlot(chunkBytes_, 0, bytes, unit_) : slotOf(bytes);
    size_t at = (end_ + slot - 1) / slot * slot;
    const bool pastTheSpan = spanBytes / 2 >= slot && at + slot > spanBytes;
    if (at + slot > 2 * chunkBytes_ || (pastTheSpan && start_ >= slot)) at = 0;
    start_ = at;
    end_ = at + bytes;
    at_ = at + kSlackBytes * (at / unit_);
    // The units the region covers, its slack in the last one.
    for (size_t u = start_ / unit_; u <= (end_ - 1) / unit_; ++u) {
      const uint32_t before = lastRound_[u];
      if (before != kNoRound && (!reused_ || static_cast<int32_t>(before - reusedRound_) > 0)) {
        reusedRound_ = before;
        reused_ = true;
      }
      lastRound_[u] = round;
    }
    return at_;
  }
  // The offset of the round placed last.
  size_t at() const { return at_; }
  // Whether the round placed last shares a unit with an earlier one, and
  // the latest such round: its readers must be done before it is written.
  // A region's bytes, its slack included, lie in the units its virtual
  // offsets cover, so this names the latest round sharing bytes with it or
  // a later one. The next round starts in a later unit than the last one
  // ends in, so the round named is two or more back.
  bool reusesBytes() const { return reused_; }
  uint32_t reusedRound() const { return reusedRound_; }

 private:
  static constexpr uint32_t kNoRound = ~uint32_t{0};
  // The slot of a round of `bytes`: the chunk, or when walking (walkFrom
  // not 0) and the round is of walkFrom or more, the chunk halved while the
  // round fits, the half stays a whole number of cache lines and is no
  // smaller than `least`.
  static size_t halvedSlot(size_t chunkBytes, size_t walkFrom, size_t bytes, size_t least = 0) {
    size_t slot = chunkBytes;
    if (bytes >= walkFrom) {
      while (slot % 128 == 0 && bytes <= slot / 2 && slot / 2 >= least) slot /= 2;
    }
    return slot;
  }
  size_t slotOf(size_t bytes) const { return walk_ ? halvedSlot(chunkBytes_, walkFrom_, bytes) : chunkBytes_; }
  // The smallest slot place() can choose, a round of walkFrom's: every
  // slot is a multiple of it.
  static size_t smallestSlot(size_t chunkBytes, size_t walkFrom) { return halvedSlot(chunkBytes, walkFrom, walkFrom); }

  size_t chunkBytes_;
  bool walk_;
  size_t walkFrom_;
  size_t unit_;
  size_t at_ = 0;   // where the last round's region lies
  size_t start_ = 0;  // the virtual offset where it starts
  size_t end_ = 0;    // the virtual offset just past it
  std::vector<uint32_t> lastRound_;  // per unit, the last round placed in it
  bool reused_ = false;
  uint32_t reusedRound_ = 0;
};

}  // namespace fairway
