// The one selection table: for a collective, the memory its buffers live
// in, the communicator's layout and the call's size, which algorithm runs
// and which provider serves each of its phases. Host and device calls,
// the staged device path and fairway-info all ask it, and nothing else
// decides. Its rows (selection_rows.h): FAIRWAY_ALGO's overrides, NCCL's
// own collective and two-phase with NCCL inside nodes for device buffers,
// the node's segment, the alpha-beta cost model across uniform nodes, and
// the crossovers measured on this project's reference machine
// (docs/design/selection.md).
#pragma once

#include <array>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/config.h"
#include "core/link_model.h"
#include "core/log.h"
#include "core/status.h"
#include "algorithms/selection_key.h"
#include "selection/selection_rows.h"

namespace fairway {

class Selector {
 public:
  // The default rows under FAIRWAY_ALGO's, in the order written. Rejects
  // overrides naming an unknown collective, or an algorithm whose row does
  // not run it.
  static Status create(const std::vector<AlgoOverride>& overrides, Selector* out);
  Selector();  // the default rows alone
  Selector(const Selector& other);
  Selector& operator=(const Selector& other);

  // The link parameters of the cost model (FAIRWAY_INTRA_LINK / _INTER_LINK).
  void setLinks(const LinkModel& intra, const LinkModel& inter);
  // The NICs a node's ranks reach other nodes through (ClusterShape::rails).
  void setRails(int rails) {
    rails_ = rails > 0 ? rails : 1;
    ++generation_;
  }
  int rails() const { return rails_; }
  // The pipeline settings every selection carries (FAIRWAY_SEGMENT_BYTES, ...).
  void setPipeline(const PipelineSettings& pipeline) {
    pipeline_ = pipeline;
    ++generation_;
  }
  void setDeviceRoutes(const DeviceRoutes& routes) {
    conditions_.routes = routes;
    ++generation_;
  }
  // Whether this rank's node has its shared-memory segment (the same on
  // every rank of a node). It serves host collectives on one node and the
  // node phase of two-phase and leaders.
  void setSharedMemory(bool available) {
    conditions_.sharedMemory = available;
    ++generation_;
  }
  bool sharedMemory() const { return conditions_.sharedMemory; }
  const DeviceRoutes& deviceRoutes() const { return conditions_.routes; }

  // The first row that applies to key and whose algorithm can run here
  // (selection_rows.h); an override that cannot run is warned about once
  // and the next row decides. Then the providers of the phases: NCCL for
  // its own collective and, where it reaches a node's ranks, for
  // two-phase's node phase; the node's segment for the phases it can
  // carry; UCX (host, device memory or staged) for the rest. Each choice
  // is logged at INFO once per collective, memory and power-of-two size,
  // with its row and predicted time.
  Selection select(const SelectionKey& key) const;
  // The plan for `algorithm` on key, its providers placed as select()
  // places them: what fairway-sim runs when it forces an algorithm.
  Selection planFor(const SelectionKey& key, Algorithm algorithm) const;
  // The cost model's time for algorithm on key (negative: no model of it,
  // as for NCCL's own and the shared-memory collectives). Not part of
  // select(): only its INFO log and fairway's tests ask, not every call.
  double predict(const SelectionKey& key, Algorithm algorithm) const;
  // Whether select() logs its choices (INFO or TRACE for ALGO).
  bool logsChoices() const { return logChoices_; }
  // Changes with every setting that can change a choice, so a memo of
  // earlier choices (SelectionMemo) knows when they no longer stand.
  uint64_t generation() const { return generation_; }
  // Whether NCCL carries device point-to-point messages.
  bool ncclMessages() const { return conditions_.routes.ncclEverywhere; }

 private:
  std::optional<Algorithm> cheapestByModel(const SelectionKey& key, bool compressed) const;
  void placeProviders(const SelectionKey& key, Selection* s) const;
  void logOnce(const SelectionKey& key, const Selection& selection) const;
  std::vector<SelectionRow> rows_;  // FAIRWAY_ALGO's, then the defaults
  RowIndex index_;  // of rows_
  // The log settings are read once per process; select asks on every call.
  bool logChoices_ = logEnabled(LogLevel::Info, LogSubsys::Algo);
  LinkModel intra_ = kDefaultIntraLink;
  LinkModel inter_ = kDefaultInterLink;
  int rails_ = 1;
  PipelineSettings pipeline_;
  SelectionConditions conditions_;
  uint64_t generation_ = 1;
  // Choices already logged: (collective, on device, log2 of the size).
  mutable std::mutex loggedMutex_;
  mutable std::set<std::tuple<int, bool, int>> logged_;
};

}  // namespace fairway
