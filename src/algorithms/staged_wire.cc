#include "algorithms/staged_wire.h"

#include <string>

namespace fairway {

Status StagedWire::settle(DataSpace& space, const Pending* list, size_t count) {
  Status first;
  size_t kept = 0;
  for (InFlight& m : inFlight_) {
    if (m.pending < list || m.pending >= list + count) {
      inFlight_[kept++] = m;
      continue;
    }
    if (m.landing != nullptr && first.isOk()) first = space.copy(m.landing, m.bounce, m.bytes);
    release(m.bounce);
  }
  inFlight_.resize(kept);
  return first;
}

Status StagedWire::finish(bool succeeded) {
  const size_t left = inFlight_.size();
  for (InFlight& m : inFlight_) release(m.bounce);
  inFlight_.clear();
  if (succeeded && left > 0) {
    return Status(fwInternalError, std::to_string(left) + " staged messages were never waited for");
  }
  return Status::ok();
}

}  // namespace fairway
