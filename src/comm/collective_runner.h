// A communicator's ranks as the device path and the link probe see them:
// who they are, their messages, the selection table, and the engine that
// runs host algorithms in call order. Communicator implements it;
// DeviceCollectives and measureLinks take it instead of the Communicator,
// so neither reaches into the communicator's lifecycle or members.
#pragma once

#include <cstdint>
#include <functional>

#include "algorithms/data_space.h"
#include "algorithms/node_phase.h"
#include "algorithms/staged_wire.h"
#include "collective/collective_args.h"
#include "core/status.h"
#include "p2p/messenger.h"
#include "p2p/point_to_point.h"
#include "selection/plan_binding.h"
#include "selection/selector.h"
#include "topo/rank_layout.h"

namespace fairway {

class CollectiveRunner {
 public:
  // How a reserved collective runs: what selection chose for it (the
  // algorithm and the provider of each phase; a phase the plan gives to
  // the node's segment runs there), the data space its buffers are in
  // (null: host memory), the node phase and rail space the caller
  // provides, and the staged wire its messages cross (null: the
  // transport reaches the buffers).
  struct Reserved {
    bool chosen = false;  // false: select here, as for a host call
    Selection selection;
    // What the plan may bind to (selection/plan_binding.h); no buffers:
    // the communicator's host memory and, for a whole communicator, the
    // node's segment.
    PlanProviders providers;
    // The call's entry in the flight record, posted where it was called;
    // none: execute posts one (internal collectives).
    uint64_t traceId = ~uint64_t{0};
    bool startsAtPost = false;  // posted just now, with nothing queued before it
  };

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const RankLayout& layout() const = 0;
  // The selection table, with this communicator's device routes.
  virtual const Selector& selector() const = 0;
  virtual Messenger& messenger() = 0;
  // Point-to-point messages: tagged, numbered in call order, from any source.
  virtual PointToPoint& pointToPoint() = 0;

  // Runs a validated host collective and returns when it is done.
  virtual Status collective(const CollectiveArgs& args) = 0;
  // Work handed to the worker thread: queued behind earlier calls, with
  // `collectives` collective numbers reserved now, in call order, so every
  // rank numbers them alike. fn runs later on the worker and runs its
  // collectives through runReserved with those numbers; it must not call
  // collective() (the worker would wait for itself).
  virtual Status startReserved(uint32_t collectives, std::function<Status(uint32_t firstSequence)> fn) = 0;
  virtual Status runReserved(const CollectiveArgs& args, uint32_t sequence, const Reserved& how) = 0;

 protected:
  ~CollectiveRunner() = default;
};

}  // namespace fairway
