// The one selection table: for a collective, the memory its buffers live
// in, the communicator's layout and the call's size, which algorithm runs
// and which provider serves each of its phases. Host and device calls,
// the staged device path and fairway-info all ask it, and nothing else
// decides. Inputs: crossovers measured on this project's reference machine
// (docs/DESIGN.md), the alpha-beta cost model across nodes, the transport
// plan's routes for device buffers, and the FAIRWAY_ALGO overrides.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "algorithms/algorithm.h"
#include "collective/collective_args.h"
#include "core/link_model.h"
#include "core/provider.h"
#include "core/status.h"
#include "topo/rank_layout.h"
#include "topo/transport_plan.h"

namespace fairway {

// What may carry device buffers on a communicator, from its transport plan.
struct DeviceRoutes {
  bool present = false;         // this communicator has device buffers at all
  bool ncclEverywhere = false;  // NCCL reaches every rank (one node, or NCCL at both levels)
  bool ncclInNodes = false;     // NCCL inside each node, UCX between nodes
  bool ucxDirect = false;       // UCX reaches device memory; otherwise it is staged
  Provider ucx() const { return ucxDirect ? Provider::DeviceUcx : Provider::StagedUcx; }
  // A communicator's routes, from its transport plan.
  static DeviceRoutes of(const TransportPlan& plan);
};

struct SelectionKey {
  CollectiveKind kind = CollectiveKind::Barrier;
  bool onDevice = false;
  // The whole buffer (allreduce, reduce-scatter, broadcast, reduce) or one
  // rank's block (allgather, all-to-all, gather, scatter): selectionBytes().
  size_t bytes = 0;
  const RankLayout* layout = nullptr;  // null: a group inside a communicator
  int ranks = 1;                       // the communicator's or the group's
  bool ncclRunsIt = false;             // NCCL has this collective for the call's type and op
  // A compressed call: its wire bytes per input byte (the cost model's
  // rail bytes). Allreduce and reduce-scatter then pick a compressed
  // algorithm; allgather a plain one for its wire size.
  bool compressed = false;
  double wireRatio = 1;
};

// The size a call is selected by (see SelectionKey::bytes).
size_t selectionBytes(const CollectiveArgs& args, int ranks);
// A call's key: its collective, size and compression, on `ranks` ranks
// laid out as `layout` (null: a group), in host or device memory.
SelectionKey selectionKeyOf(const CollectiveArgs& args, int ranks, const RankLayout* layout, bool onDevice);

struct Selection {
  Algorithm algorithm = Algorithm::Ring;
  // A flat algorithm has one provider: node == rail. Two-phase's node
  // phase runs on `node`, its rail phase on `rail`.
  Provider node = Provider::HostUcx;
  Provider rail = Provider::HostUcx;
};

class Selector {
 public:
  // Rejects overrides naming an unknown collective, or an algorithm that
  // does not implement that collective.
  static Status create(const std::map<std::string, std::string>& overrides, Selector* out);
  Selector() = default;
  Selector(const Selector& other);
  Selector& operator=(const Selector& other);

  // The link parameters of the cost model (FAIRWAY_INTRA_LINK / _INTER_LINK).
  void setLinks(const LinkModel& intra, const LinkModel& inter);
  void setDeviceRoutes(const DeviceRoutes& routes) { routes_ = routes; }
  // Whether this rank's node has its shared-memory segment (the same on
  // every rank of a node). It serves host collectives on one node and the
  // node phase of two-phase and leaders.
  void setSharedMemory(bool available) { sharedMemory_ = available; }
  bool sharedMemory() const { return sharedMemory_; }
  const DeviceRoutes& deviceRoutes() const { return routes_; }

  // The table. Host buffers: FAIRWAY_ALGO, then across uniform nodes the
  // cheapest candidate under the cost model, else the measured crossovers;
  // two-phase or leaders where they cannot run falls back to those
  // (warned once). Device buffers: NCCL's own collective where NCCL
  // reaches every rank and runs the call; two-phase with NCCL inside nodes
  // for allreduce, reduce-scatter and allgather across uniform nodes;
  // otherwise the host's choice over UCX (direct or staged). A forced
  // algorithm wins over NCCL's own collective. Each choice is logged at
  // INFO once per collective, memory and power-of-two size, with its
  // predicted time.
  Selection select(const SelectionKey& key) const;
  // The cost model's time for algorithm on key (negative: no model of it,
  // as for NCCL's own and the shared-memory collectives). Not part of
  // select(): only its INFO log and fairway's tests ask, not every call.
  double predict(const SelectionKey& key, Algorithm algorithm) const;
  // Whether NCCL carries device point-to-point messages.
  bool ncclMessages() const { return routes_.ncclEverywhere; }

 private:
  Algorithm hostAlgorithm(const SelectionKey& key) const;
  Algorithm defaultOnOneNode(const SelectionKey& key) const;
  std::optional<Algorithm> cheapestAcrossNodes(const SelectionKey& key) const;
  Algorithm compressedAlgorithm(const SelectionKey& key) const;
  // Whether the node's segment can carry this call's data: host buffers,
  // or device buffers staged through pinned host memory (never device
  // memory UCX reaches directly).
  bool segmentServes(const SelectionKey& key) const;
  // Gives the segment the phases of s it serves: the node phase of
  // two-phase and leaders, and both phases of the flat shm algorithm.
  void placeOnSegment(const SelectionKey& key, Selection* s) const;
  void logOnce(const SelectionKey& key, const Selection& selection) const;

  std::map<CollectiveKind, Algorithm> forced_;
  LinkModel intra_ = kDefaultIntraLink;
  LinkModel inter_ = kDefaultInterLink;
  DeviceRoutes routes_;
  bool sharedMemory_ = false;
  // Choices already logged: (collective, on device, log2 of the size).
  mutable std::mutex loggedMutex_;
  mutable std::set<std::tuple<int, bool, int>> logged_;
};

}  // namespace fairway
