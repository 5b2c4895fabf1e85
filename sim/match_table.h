// The simulator's unmatched sends and receives, by receiver and tag (the
// tag names the sender): an open-addressing hash table of 24-byte slots.
// A rank of a two-phase call on thousands of nodes posts thousands of
// messages at once, most of them before their other end, so this table
// holds millions of keys; one probe sequence in one array keeps a lookup
// to about one cache miss where a node-based map takes several.
#pragma once

#include <cstdint>
#include <vector>

namespace fairway::sim {

class MatchTable {
 public:
  // A key's oldest and newest waiting message (a FIFO list through the
  // messages themselves, as tag matching is).
  struct Entry {
    uint64_t tag = 0;
    int dst = -1;  // -1: an empty slot
    uint32_t first = 0, last = 0;
  };

  Entry* find(int dst, uint64_t tag) {
    if (size_ == 0) return nullptr;
    for (size_t i = home(dst, tag);; i = (i + 1) & mask_) {
      Entry& e = slots_[i];
      if (e.dst < 0) return nullptr;
      if (e.dst == dst && e.tag == tag) return &e;
    }
  }
  // The key must be absent.
  void insert(int dst, uint64_t tag, uint32_t message) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    size_t i = home(dst, tag);
    while (slots_[i].dst >= 0) i = (i + 1) & mask_;
    slots_[i] = Entry{tag, dst, message, message};
    ++size_;
  }
  // Backward-shift deletion: no tombstones, so probes stay short.
  void erase(Entry* e) {
    size_t hole = static_cast<size_t>(e - slots_.data());
    for (size_t i = (hole + 1) & mask_; slots_[i].dst >= 0; i = (i + 1) & mask_) {
      const size_t want = home(slots_[i].dst, slots_[i].tag);
      // Move it into the hole unless its home lies cyclically in (hole, i].
      const bool homeBetween = hole <= i ? (want > hole && want <= i) : (want > hole || want <= i);
      if (!homeBetween) {
        slots_[hole] = slots_[i];
        hole = i;
      }
    }
    slots_[hole].dst = -1;
    --size_;
  }
 private:
  size_t home(int dst, uint64_t tag) const {
    uint64_t h = tag ^ (static_cast<uint64_t>(static_cast<uint32_t>(dst)) * 0x9E3779B97F4A7C15ull);
    h ^= h >> 33;  // a 64-bit finalizer: every bit of the key moves the slot
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return static_cast<size_t>(h) & mask_;
  }
  void grow() {
    std::vector<Entry> old = std::move(slots_);
    slots_.assign(old.empty() ? 1024 : 2 * old.size(), Entry{});
    mask_ = slots_.size() - 1;
    size_ = 0;
    for (const Entry& e : old) {
      if (e.dst < 0) continue;
      size_t i = home(e.dst, e.tag);
      while (slots_[i].dst >= 0) i = (i + 1) & mask_;
      slots_[i] = e;
      ++size_;
    }
  }
  std::vector<Entry> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace fairway::sim
