// The algorithm registry: one row per algorithm, defined in the file of
// its code, saying everything the rest of the library asks of it: its
// name, the collectives it runs, where it can run (and why not), what it
// costs, which providers serve its phases, and the function that runs it.
// Selection, FAIRWAY_ALGO, the INFO log, the cost model, dispatch and
// fairway-sim read the rows and nothing else. The built-in rows are listed
// in algorithm.h; registerAlgorithm adds one at run time (a test, an
// extension linked into the program), before communicators are created.
#pragma once

#include <optional>
#include <string>

#include "algorithms/algorithm.h"
#include "algorithms/context.h"
#include "algorithms/cost_terms.h"
#include "algorithms/selection_key.h"
#include "collective/collective_args.h"
#include "core/status.h"

namespace fairway {

// Which providers serve an algorithm's phases (Selector::placeProviders).
enum class Placement : uint8_t {
  PointToPoint,     // every step a message over the call's point-to-point provider (UCX)
  NodeThenRails,    // a node phase on the node's provider where one serves it (the segment,
                    // or NCCL where the row says so), the rest point-to-point
  WholeCallOnNode,  // the whole call on the node's segment
  ProviderOwn,      // the provider's own collective (NCCL): no run function here
};

struct AlgorithmRow {
  const char* name;      // as FAIRWAY_ALGO, the logs and the flight record write it
  unsigned collectives;  // bitOf() of the collectives it runs
  // Runs one validated call of a collective it serves. Compression,
  // the list forms and a compressed allgather's wire are dispatch's
  // (dispatch.cc): a row sees a plain call, or a compressed reduction if
  // `compressed`.
  Status (*run)(CollectiveContext& ctx, const CollectiveArgs& args);
  // Predicted microseconds of a call (CostTerms::S: the whole buffer for
  // allreduce, reduce-scatter, broadcast and reduce, one rank's block for
  // the others), negative where it has no formula; null: no model at all
  // (the cost model never chooses it).
  double (*cost)(CollectiveKind kind, const CostTerms& terms);
  // Why it cannot run `key` here, or null when it can; a null function:
  // it runs anywhere its collectives are called.
  const char* (*whyCannotRun)(const SelectionKey& key, const SelectionConditions& conditions) = nullptr;
  Placement placement = Placement::PointToPoint;
  bool ncclNodePhase = false;  // NodeThenRails: NCCL serves the node phase where it reaches a node's ranks
  bool compressed = false;     // runs compressed reductions, and only those
  // Chosen by the default table's own row only: FAIRWAY_ALGO does not
  // name it and the cost model does not weigh it (NCCL's own collective).
  bool tableOnly = false;
};

// The built-in rows, each defined in its algorithm's file.
#define FW_DECLARE_ROW(id, row) extern const AlgorithmRow row;
FAIRWAY_BUILTIN_ALGORITHMS(FW_DECLARE_ROW)
#undef FW_DECLARE_ROW

// The row of an id, or null for an id no row has.
const AlgorithmRow* rowOf(Algorithm algorithm);
// The id FAIRWAY_ALGO and fairway-sim know by this name (not table-only rows).
std::optional<Algorithm> algorithmNamed(const std::string& name);

// A fixed-capacity list of ids, in registry order.
class AlgorithmList {
 public:
  static constexpr int kCapacity = 64;
  const Algorithm* begin() const { return ids_; }
  const Algorithm* end() const { return ids_ + count_; }
  int size() const { return count_; }
  void push(Algorithm a) { ids_[count_++] = a; }

 private:
  Algorithm ids_[kCapacity] = {};
  int count_ = 0;
};
// The algorithms that run a collective and FAIRWAY_ALGO may name for it,
// the ones the cost model compares.
AlgorithmList algorithmsOf(CollectiveKind kind);
// Every algorithm FAIRWAY_ALGO knows by name.
AlgorithmList namedAlgorithms();

// Adds a row: copies it and gives it the next free id. Refused with
// fwInvalidArgument for an empty or taken name, no collectives, no run
// function or a provider's own collective, and once the table is full.
// Rows are never removed; call before the communicators that may choose
// it are created.
Status registerAlgorithm(const AlgorithmRow& row, Algorithm* id);

// Predicted microseconds of `algorithm` for a call of `bytes` (see
// AlgorithmRow::cost) on `shape`; negative: no model of it.
double predictMicros(CollectiveKind kind, Algorithm algorithm, size_t bytes, const ClusterShape& shape);

}  // namespace fairway
