// The rows of the selection table. A row says when it applies (which
// collectives, host or device memory, which layout class, which sizes,
// compressed reductions or every other call, and what the communicator's
// routes must offer) and what it chooses: one algorithm, or the cheapest
// the cost model finds. FAIRWAY_ALGO's overrides are rows of the same
// shape above the defaults. The first row that applies and whose
// algorithm can run here wins (selection/selector.cc).
#pragma once

#include <cstddef>
#include <limits>
#include <vector>

#include "algorithms/registry.h"
#include "algorithms/selection_key.h"

namespace fairway {

// Masks of a row.
constexpr unsigned kHostMemory = 1, kDeviceMemory = 2, kAnyMemory = 3;
constexpr unsigned kGroup = 1, kOneNode = 2, kUniformNodes = 4, kUnevenNodes = 8, kAnyLayout = 15;
// What a row needs of the device routes (and of NCCL for the call's type and op).
// kNeedsSegment: the node's segment can carry the call's data.
constexpr unsigned kNeedsNothing = 0, kNeedsNcclEverywhere = 1, kNeedsNcclInNodes = 2, kNeedsSegment = 4;

// The layout class of a key: a group inside a communicator, one node,
// several nodes of one size, or of different sizes.
inline unsigned layoutClassOf(const SelectionKey& key) {
  if (key.layout == nullptr) return kGroup;
  if (key.layout->nodeCount() == 1) return kOneNode;
  return key.layout->uniform() ? kUniformNodes : kUnevenNodes;
}
// Allreduce and reduce-scatter that compress: the compressed algorithms'
// rows. A compressed allgather runs a plain algorithm over its wire format.
inline bool isCompressedReduction(const SelectionKey& key) {
  return key.compressed && (key.kind == CollectiveKind::AllReduce || key.kind == CollectiveKind::ReduceScatter);
}

struct SelectionRow {
  unsigned collectives = kAnyCollective;
  unsigned memories = kAnyMemory;
  unsigned layouts = kAnyLayout;
  size_t fromBytes = 0;              // the call's selection size in [fromBytes, toBytes)
  size_t toBytes = ~size_t{0};
  int minRanks = 1;                  // the call's ranks (SelectionKey::ranks) in [minRanks, maxRanks]
  int maxRanks = std::numeric_limits<int>::max();
  bool compressed = false;           // for compressed reductions, or for every other call
  unsigned needs = kNeedsNothing;
  bool byModel = false;              // the cost model's cheapest runnable algorithm, else `algorithm`
  Algorithm algorithm = Algorithm::Ring;
  const char* rule = "";             // how the INFO log names the row
};

// The defaults, in order.
const std::vector<SelectionRow>& defaultRows();
// FAIRWAY_ALGO's row for one item: its collective, sizes and rank counts,
// every memory and layout.
SelectionRow overrideRow(CollectiveKind kind, Algorithm algorithm, size_t fromBytes, size_t toBytes, int minRanks,
                         int maxRanks);
extern const char* const kOverrideRule;  // an override row's rule

// The rows that may apply to a call by everything but its size, for every
// combination of collective, memory, layout class, compressed or plain,
// and routes satisfied: worked out once per table, so a call (select runs
// on every one) tests only the size ranges of its own few rows.
class RowIndex {
 public:
  RowIndex() = default;
  explicit RowIndex(const std::vector<SelectionRow>& rows);
  struct Range {
    const uint16_t* begin;
    const uint16_t* end;
  };
  // Indices into the table's rows, in the table's order.
  Range candidates(const SelectionKey& key, const SelectionConditions& conditions) const {
    const unsigned routes = (conditions.routes.ncclEverywhere && key.ncclRunsIt ? kNeedsNcclEverywhere : 0) |
                            (conditions.routes.ncclInNodes && key.ncclRunsIt ? kNeedsNcclInNodes : 0) |
                            (conditions.segmentServes(key) ? kNeedsSegment : 0);
    const size_t slot = slotOf(static_cast<unsigned>(key.kind), key.onDevice ? 1 : 0,
                               static_cast<unsigned>(__builtin_ctz(layoutClassOf(key))), isCompressedReduction(key),
                               routes);
    return {rows_.data() + first_[slot], rows_.data() + first_[slot + 1]};
  }

 private:
  static constexpr size_t kMemories = 2, kLayoutClasses = 4, kRoutes = 8;
  static constexpr size_t kSlots = kCollectiveKinds * kMemories * kLayoutClasses * 2 * kRoutes;
  static size_t slotOf(unsigned kind, unsigned memory, unsigned layout, bool compressed, unsigned routes) {
    return (((kind * kMemories + memory) * kLayoutClasses + layout) * 2 + (compressed ? 1 : 0)) * kRoutes + routes;
  }
  std::vector<uint32_t> first_;  // kSlots + 1 offsets into rows_
  std::vector<uint16_t> rows_;
};
}  // namespace fairway
