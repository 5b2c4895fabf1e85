// Alpha-beta cost model for choosing between flat and hierarchical
// algorithms (link_model.h). The inter-node link is a node's NIC, shared by
// all its ranks.
#pragma once

#include <cstddef>
#include <string>

#include "algorithms/algorithm.h"
#include "collective/collective_args.h"
#include "core/link_model.h"
#include "core/status.h"

namespace fairway {

struct ClusterShape {
  int ranks = 1;
  int nodes = 1;
  int perNode = 1;  // only meaningful when every node has the same count
  LinkModel intra = kDefaultIntraLink;
  LinkModel inter = kDefaultInterLink;
  double wireRatio = 1;  // compressed algorithms: bytes on the wire per input byte
};

// Predicted microseconds of algorithm for a collective of `bytes` (the
// whole buffer for allreduce and reduce-scatter, one rank's block for
// allgather), or a negative value when the model has no formula for it.
double predictMicros(CollectiveKind kind, Algorithm algorithm, size_t bytes, const ClusterShape& shape);

}  // namespace fairway
