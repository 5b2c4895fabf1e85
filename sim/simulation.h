// One simulated call: a collective of a given size, on `nodes` nodes of a
// cluster spec, run by a named algorithm on every simulated rank (the
// library's own dispatch and algorithm code), or by what the library's
// selector picks for it, as a job on that cluster would.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "algorithms/algorithm.h"
#include "collective/collective_args.h"
#include "core/compression.h"
#include "core/pipeline_settings.h"
#include "algorithms/selection_key.h"
#include "sim/cluster_spec.h"
#include "sim/engine.h"

namespace fairway::sim {

struct Scenario {
  ClusterSpec spec;
  int nodes = 1;
  CollectiveKind kind = CollectiveKind::AllReduce;
  fwDataType_t datatype = fwFloat32;
  fwRedOp_t op = fwSum;
  int root = 0;
  Compression compression;  // allreduce, reduce-scatter, allgather
  PipelineSettings pipeline;
  // The NICs per node the selector's cost model is told of (-1: the
  // spec's, as a job finds them; 1: the model before it knew of rails).
  int selectorRails = -1;
  // Engine::setRateQuantum: 0, exact; 1 us changed no prediction checked
  // (docs/simulator.md) and keeps thousands of nodes in minutes.
  double rateQuantumUs = 1;
  int ranks() const { return nodes * spec.ranksPerNode; }
};

// nccl-tests' size of a call (what -b and -e give) as an element count
// per the API: allreduce's count, reduce-scatter's recvcount, allgather's
// sendcount, ...; 0 when bytes is too small for one element per rank.
size_t countForSize(const Scenario& s, size_t bytes);
// nccl-tests' bus bandwidth factor of the collective on n ranks.
double busFactor(CollectiveKind kind, int n);

// What the selector of a job on this cluster picks for the call (links
// as FAIRWAY_MEASURE_LINKS would find them: one rank's path inside a node
// and one NIC between nodes).
Selection selectorChoice(const Scenario& s, size_t count);
// The algorithms that implement the call here, in the selector's list
// order (compressed ones for a compressed reduction, plain ones otherwise).
std::vector<Algorithm> applicableAlgorithms(const Scenario& s, size_t count);

// The selector's cost-model prediction, in microseconds, of each of the
// applicable algorithms (in that order); negative where the model has no
// formula for one.
std::vector<std::pair<Algorithm, double>> modelPredictions(const Scenario& s, size_t count);

struct Outcome {
  Algorithm algorithm = Algorithm::Ring;
  double timeUs = 0;  // the last rank's end, every rank starting at 0
  RunStats stats;
};
// Runs the call with `algorithm` on every rank. trace: every message of it.
Status simulate(const Scenario& s, size_t count, Algorithm algorithm, Outcome* out,
                std::vector<TraceRecord>* trace = nullptr);

}  // namespace fairway::sim
