// Alpha-beta cost model for choosing between flat and hierarchical
// algorithms: a message of b bytes over a link costs alpha + b / beta. The
// inter-node link is a node's NIC, shared by all its ranks.
#pragma once

#include <cstddef>
#include <string>

#include "algorithms/selector.h"
#include "core/status.h"

namespace fairway {

struct LinkModel {
  double alphaUs = 1;    // per-message latency, microseconds
  double gbPerSec = 5;   // bandwidth, GB/s (= bytes per nanosecond)
  double costUs(double bytes) const { return alphaUs + bytes / (gbPerSec * 1e3); }
  // Parses "ALPHA_US,GBPS" (FAIRWAY_INTRA_LINK / FAIRWAY_INTER_LINK).
  static Status parse(const std::string& variable, const std::string& text, LinkModel* out);
};

struct ClusterShape {
  int ranks = 1;
  int nodes = 1;
  int perNode = 1;  // only meaningful when every node has the same count
  LinkModel intra{1, 5};
  LinkModel inter{10, 1.25};
};

// Predicted microseconds of algorithm for a collective of `bytes` (the
// whole buffer for allreduce and reduce-scatter, one rank's block for
// allgather), or a negative value when the model has no formula for it.
double predictMicros(CollectiveKind kind, Algorithm algorithm, size_t bytes, const ClusterShape& shape);

}  // namespace fairway
