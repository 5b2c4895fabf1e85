#include "sim/simulation.h"

#include <memory>

#include "algorithms/context.h"
#include "algorithms/dispatch.h"
#include "algorithms/registry.h"
#include "collective/operations.h"
#include "core/datatype.h"
#include "core/reducer.h"
#include "p2p/scratch.h"
#include "selection/selection_rows.h"
#include "selection/plan_binding.h"
#include "selection/selector.h"
#include "sim/segment_model.h"
#include "sim/sim_rank.h"
#include "topo/rank_layout.h"

namespace fairway::sim {
namespace {

RankLayout layoutOf(const Scenario& s) {
  std::vector<std::string> nodeOfRank;
  nodeOfRank.reserve(s.ranks());
  for (int r = 0; r < s.ranks(); ++r) nodeOfRank.push_back("node" + std::to_string(r / s.spec.ranksPerNode));
  return RankLayout(nodeOfRank);
}

CollectiveArgs argsOf(const Scenario& s, size_t count) {
  CollectiveArgs a = makeArgs(s.kind, reinterpret_cast<const void*>(kSimSendBuffer),
                              reinterpret_cast<void*>(kSimRecvBuffer), count, s.datatype, s.op, s.root);
  if (operationRow(s.kind).compresses) a.compression = s.compression;
  return a;
}

bool reduces(CollectiveKind k) { return operationRow(k).reduces; }

SelectionConditions conditionsOf(const ClusterSpec& spec) {
  SelectionConditions c;
  c.routes.present = spec.onDevice;
  c.routes.ucxDirect = spec.onDevice;
  c.sharedMemory = spec.sharedMemorySegment;
  return c;
}

Selector selectorOf(const Scenario& s) {
  Selector selector;
  const ClusterSpec& c = s.spec;
  const double intraGBs = c.busGBs > 0 ? std::min(c.intraGBs, c.busGBs) : c.intraGBs;
  const LinkModel intra{c.intraLatencyUs + c.messageOverheadUs, intraGBs};
  const LinkModel inter{c.nicLatencyUs + c.switchLatencyUs + c.messageOverheadUs, c.nicGBs};
  selector.setLinks(intra, inter);
  selector.setPipeline(s.pipeline);
  selector.setRails(s.selectorRails > 0 ? s.selectorRails : std::min(c.nicsPerNode, c.ranksPerNode));
  selector.setDeviceRoutes(conditionsOf(c).routes);
  selector.setSharedMemory(c.sharedMemorySegment);
  return selector;
}

// The algorithms that can run the call `key` describes.
std::vector<Algorithm> applicableFor(const Scenario& s, const SelectionKey& key) {
  const SelectionConditions conditions = conditionsOf(s.spec);
  const bool compressedReduction = isCompressedReduction(key);
  std::vector<Algorithm> out;
  for (Algorithm a : algorithmsOf(s.kind)) {
    const AlgorithmRow& row = *rowOf(a);
    if (row.compressed != compressedReduction) continue;
    if (row.whyCannotRun != nullptr && row.whyCannotRun(key, conditions) != nullptr) continue;
    out.push_back(a);
  }
  return out;
}

}  // namespace

size_t countForSize(const Scenario& s, size_t bytes) {
  const size_t es = datatypeSize(s.datatype);
  const size_t n = static_cast<size_t>(s.ranks());
  switch (s.kind) {
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather:
    case CollectiveKind::AllToAll:
    case CollectiveKind::Gather:
    case CollectiveKind::Scatter:
      return bytes / es / n;
    default:
      return bytes / es;
  }
}

double busFactor(CollectiveKind kind, int n) {
  switch (kind) {
    case CollectiveKind::AllReduce: return 2.0 * (n - 1) / n;
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather:
    case CollectiveKind::AllToAll: return static_cast<double>(n - 1) / n;
    default: return 1;
  }
}

Selection selectorChoice(const Scenario& s, size_t count) {
  const RankLayout layout = layoutOf(s);
  const Selector selector = selectorOf(s);
  return selector.select(selectionKeyOf(argsOf(s, count), s.ranks(), &layout, s.spec.onDevice));
}

std::vector<Algorithm> applicableAlgorithms(const Scenario& s, size_t count) {
  const RankLayout layout = layoutOf(s);
  return applicableFor(s, selectionKeyOf(argsOf(s, count), s.ranks(), &layout, s.spec.onDevice));
}

std::vector<std::pair<Algorithm, double>> modelPredictions(const Scenario& s, size_t count) {
  const RankLayout layout = layoutOf(s);
  const Selector selector = selectorOf(s);
  const SelectionKey key = selectionKeyOf(argsOf(s, count), s.ranks(), &layout, s.spec.onDevice);
  std::vector<std::pair<Algorithm, double>> out;
  for (Algorithm a : applicableFor(s, key)) out.emplace_back(a, selector.predict(key, a));
  return out;
}

Status simulate(const Scenario& s, size_t count, Algorithm algorithm, Outcome* out, std::vector<TraceRecord>* trace) {
  if (s.nodes < 1 || s.spec.ranksPerNode < 1) return Status(fwInvalidArgument, "a simulation needs at least one rank");
  const RankLayout layout = layoutOf(s);
  const CollectiveArgs args = argsOf(s, count);
  const SelectionKey key = selectionKeyOf(args, s.ranks(), &layout, s.spec.onDevice);
  const AlgorithmRow* row = rowOf(algorithm);
  if (row == nullptr || row->run == nullptr || (row->collectives & bitOf(s.kind)) == 0) {
    return Status(fwInvalidArgument, std::string(algorithmName(algorithm)) + " does not run " +
                                         collectiveName(s.kind) + " in the simulator");
  }
  if (row->whyCannotRun != nullptr) {
    if (const char* why = row->whyCannotRun(key, conditionsOf(s.spec))) {
      return Status(fwInvalidArgument, std::string(row->name) + " cannot run here: " + why);
    }
  }
  // Providers placed as a job's selector places them, bound as a job binds them.
  const Selection plan = selectorOf(s).planFor(key, algorithm);
  const size_t elementSize = datatypeSize(s.datatype);
  const uint8_t signature = collectiveSignature(args);
  const int n = s.ranks();
  Engine engine(s.spec, s.nodes);
  engine.keepTrace(trace != nullptr);
  engine.setRateQuantum(s.rateQuantumUs);
  SegmentNodePhase segment;
  static const std::vector<int> kWholeCommunicator;
  const Engine::Body body = [&](int rank, MessagePort& port, DataSpace& space) -> Status {
    PlanProviders providers;
    providers.buffers = &space;
    providers.segment = &segment;
    BoundPlan bound;
    FW_RETURN_IF_ERROR(bindPlan(plan, providers, &bound));
    Scratch scratch;
    Reducer reducer(s.datatype, reduces(s.kind) ? s.op : fwSum, n);
    CollectiveContext ctx(port, scratch, *bound.space, kWholeCommunicator, /*sequence=*/1, signature, elementSize,
                          reduces(s.kind) ? &reducer : nullptr, s.pipeline);
    ctx.setLayout(&layout);
    ctx.setHierarchy(bound.hierarchy);
    return runCollective(ctx, args, algorithm);
  };
  Outcome o;
  o.algorithm = algorithm;
  const Status st = engine.run(body, &o.stats);
  o.timeUs = o.stats.finishUs;
  if (trace != nullptr) *trace = engine.trace();
  FW_RETURN_IF_ERROR(st);
  *out = o;
  return Status::ok();
}

}  // namespace fairway::sim
