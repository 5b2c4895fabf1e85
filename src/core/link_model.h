// One link of the alpha-beta cost model: a message of b bytes costs
// alpha + b / beta. Defaults and parsing live here, once.
#pragma once

#include <string>

#include "core/status.h"

namespace fairway {

struct LinkModel {
  double alphaUs = 1;    // per-message latency, microseconds
  double gbPerSec = 5;   // bandwidth, GB/s (= bytes per nanosecond)
  double costUs(double bytes) const { return alphaUs + bytes / (gbPerSec * 1e3); }
  // Parses "ALPHA_US,GBPS" (FAIRWAY_INTRA_LINK / FAIRWAY_INTER_LINK).
  static Status parse(const std::string& variable, const std::string& text, LinkModel* out);
};

// Defaults: shared memory inside a node; a 10 Gbit/s NIC between nodes.
constexpr LinkModel kDefaultIntraLink{1, 5};
constexpr LinkModel kDefaultInterLink{10, 1.25};

}  // namespace fairway
