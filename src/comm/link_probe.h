// Measures the cost model's links when a communicator spanning nodes is
// created (FAIRWAY_MEASURE_LINKS=1): a ping-pong between rank 0 and another
// rank of its node for the intra-node link, and between rank 0 and node 1's
// leader for the inter-node link. Rank 0 broadcasts what it measured, so
// every rank's selector decides alike. Costs a few round trips and a few
// MiB per link, on top of the communicator's creation.
#pragma once

#include "comm/collective_runner.h"
#include "core/link_model.h"
#include "core/status.h"

namespace fairway {


struct MeasuredLinks {
  bool intraMeasured = false, interMeasured = false;
  LinkModel intra, inter;
};

// Collective over comm: every rank calls it.
Status measureLinks(CollectiveRunner& comm, MeasuredLinks* out);

}  // namespace fairway
