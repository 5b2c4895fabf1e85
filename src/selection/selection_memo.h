// The last selection of each collective, for calls that repeat their key.
// A training loop's collectives repeat a handful of sizes, and on a small
// host call the table's walk (the key, the row index, the run conditions,
// the providers) was a sixth of the library's own time; a call whose key
// matches its collective's last one takes that plan instead.
//
// Not shared between threads: a communicator runs one call at a time and
// asks from inside that call. Where the selector logs its choices (INFO or
// TRACE for ALGO) every call asks it, so the log stays per call.
#pragma once

#include <array>
#include <cstdint>

#include "selection/selector.h"

namespace fairway {

class SelectionMemo {
 public:
  explicit SelectionMemo(const Selector& selector) : selector_(selector) {}

  Selection select(const SelectionKey& key) {
    if (selector_.logsChoices()) return selector_.select(key);
    Entry& last = last_[static_cast<size_t>(key.kind)];
    if (last.generation == selector_.generation() && sameKey(last.key, key)) return last.selection;
    last.selection = selector_.select(key);
    last.key = key;
    last.generation = selector_.generation();
    return last.selection;
  }

 private:
  static bool sameKey(const SelectionKey& a, const SelectionKey& b) {
    return a.bytes == b.bytes && a.kind == b.kind && a.onDevice == b.onDevice && a.layout == b.layout &&
           a.ranks == b.ranks && a.ncclRunsIt == b.ncclRunsIt && a.compressed == b.compressed &&
           a.wireRatio == b.wireRatio;
  }
  struct Entry {
    SelectionKey key;
    Selection selection;
    uint64_t generation = 0;  // the selector's, when this entry was made (0: never)
  };
  const Selector& selector_;
  std::array<Entry, kCollectiveKinds> last_{};
};

}  // namespace fairway
