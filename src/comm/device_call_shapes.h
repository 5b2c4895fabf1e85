// The shapes of the device collectives a communicator has run. A device
// call runs on the worker while its caller's stream waits for it, and
// there it may not allocate (staging_buffer.h explains why). The memory a
// call needs (scratch, pinned bounce buffers) only grows, and a shape needs
// the same every time it runs, so a shape that ran once before needs none:
// it runs with its stream waiting. A shape not seen before runs with its
// stream left free, its caller waiting for it, and may allocate.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_set>

#include "collective/collective_args.h"

namespace fairway {

class DeviceCallShapes {
 public:
  // Everything of a call that decides the memory it needs: kind, counts
  // (per peer for the v-forms), type, op, root, in place or not, list
  // form, compression. Not the addresses.
  static std::string keyOf(const CollectiveArgs& args, int nranks);

  bool seen(const std::string& key) const { return keys_.count(key) != 0; }
  // A workload of ever-new shapes keeps its newest ones (the others then
  // run as first calls again).
  void remember(const std::string& key);

 private:
  static constexpr size_t kMostShapes = 4096;
  std::unordered_set<std::string> keys_;
};

}  // namespace fairway
