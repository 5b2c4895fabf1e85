#include "selection/selector.h"

#include <atomic>
#include <cstdio>
#include <optional>
#include <vector>

#include "core/log.h"
#include "algorithms/registry.h"

namespace fairway {
namespace {

// NCCL runs two-phase's node phase: device buffers, NCCL inside the
// nodes, and a call NCCL has (placeProviders places it; the cost model
// charges it).
bool nodePhaseInNccl(const SelectionKey& key, const SelectionConditions& conditions) {
  return key.onDevice && conditions.routes.ncclInNodes && key.ncclRunsIt;
}

ClusterShape shapeOf(const SelectionKey& key, const LinkModel& intra, const LinkModel& inter, int rails,
                     const PipelineSettings& pipeline, const SelectionConditions& conditions) {
  ClusterShape shape;
  shape.ranks = key.layout != nullptr ? key.layout->size() : key.ranks;
  shape.nodes = key.layout != nullptr ? key.layout->nodeCount() : 1;
  shape.perNode = key.layout != nullptr ? key.layout->localSizeOf(0) : key.ranks;
  shape.intra = intra;
  shape.inter = inter;
  shape.wireRatio = key.compressed ? key.wireRatio : 1;
  shape.rails = rails;
  shape.pipeline = pipeline;
  shape.stepUs = key.onDevice ? kDeviceStepUs : 0;
  shape.nodePhaseInNccl = nodePhaseInNccl(key, conditions);
  return shape;
}

// An override that cannot run is warned about once per collective.
void warnOverrideOnce(const SelectionKey& key, Algorithm algorithm, const char* why) {
  static std::atomic<unsigned> warned{0};
  const unsigned bit = bitOf(key.kind);
  if ((warned.fetch_or(bit) & bit) != 0) return;
  FW_LOG(Warn, Algo, "%s: FAIRWAY_ALGO's %s cannot run on %s because %s; the table's next row decides",
         collectiveName(key.kind), algorithmName(algorithm),
         key.layout != nullptr ? key.layout->describe().c_str() : "a group", why);
}

}  // namespace

Selector::Selector() : rows_(defaultRows()), index_(rows_) {}

Selector::Selector(const Selector& other) { *this = other; }

Selector& Selector::operator=(const Selector& other) {
  if (this == &other) return *this;
  rows_ = other.rows_;
  index_ = other.index_;
  intra_ = other.intra_;
  inter_ = other.inter_;
  rails_ = other.rails_;
  pipeline_ = other.pipeline_;
  conditions_ = other.conditions_;
  ++generation_;
  return *this;
}

Status Selector::create(const std::vector<AlgoOverride>& overrides, Selector* out) {
  std::vector<SelectionRow> rows;
  for (const AlgoOverride& o : overrides) {
    std::optional<CollectiveKind> kind;
    for (int k = 0; k < kCollectiveKinds; ++k) {
      if (o.collective == collectiveName(static_cast<CollectiveKind>(k))) kind = static_cast<CollectiveKind>(k);
    }
    if (!kind) {
      std::string known;
      for (int k = 0; k < kCollectiveKinds; ++k) {
        known += std::string(k == 0 ? "" : ", ") + collectiveName(static_cast<CollectiveKind>(k));
      }
      return Status(fwInvalidArgument, "FAIRWAY_ALGO names unknown collective '" + o.collective + "' (" + known + ")");
    }
    std::optional<Algorithm> chosen;
    std::string allowed;
    for (Algorithm a : algorithmsOf(*kind)) {
      allowed += std::string(allowed.empty() ? "" : "|") + algorithmName(a);
      if (o.algorithm == algorithmName(a)) chosen = a;
    }
    if (!chosen) {
      const bool known = algorithmNamed(o.algorithm).has_value();
      return Status(fwInvalidArgument, "FAIRWAY_ALGO: " + std::string(known ? "" : "unknown ") + "algorithm '" +
                                           o.algorithm + "' cannot run " + o.collective + " (choose " + allowed + ")");
    }
    rows.push_back(overrideRow(*kind, *chosen, o.fromBytes, o.toBytes, o.minRanks, o.maxRanks));
  }
  const std::vector<SelectionRow>& defaults = defaultRows();
  rows.insert(rows.end(), defaults.begin(), defaults.end());
  out->rows_ = std::move(rows);
  out->index_ = RowIndex(out->rows_);
  return Status::ok();
}

void Selector::setLinks(const LinkModel& intra, const LinkModel& inter) {
  intra_ = intra;
  inter_ = inter;
  ++generation_;
}

Selection Selector::select(const SelectionKey& key) const {
  Selection s;
  const RowIndex::Range candidates = index_.candidates(key, conditions_);
  for (const uint16_t* i = candidates.begin; i != candidates.end; ++i) {
    const SelectionRow& row = rows_[*i];
    if (key.bytes < row.fromBytes || key.bytes >= row.toBytes) continue;
    if (key.ranks < row.minRanks || key.ranks > row.maxRanks) continue;
    if (row.byModel) {
      const std::optional<Algorithm> cheapest = cheapestByModel(key, row.compressed);
      if (!cheapest) continue;  // no model of any candidate
      s.algorithm = *cheapest;
    } else {
      const AlgorithmRow* algorithm = rowOf(row.algorithm);
      if (algorithm->whyCannotRun != nullptr) {
        if (const char* why = algorithm->whyCannotRun(key, conditions_)) {
          if (row.rule == kOverrideRule) warnOverrideOnce(key, row.algorithm, why);
          continue;
        }
      }
      s.algorithm = row.algorithm;
    }
    s.rule = row.rule;
    break;
  }
  placeProviders(key, &s);
  s.pipeline = &pipeline_;
  if (logChoices_) {  // TRACE is enabled only where INFO is
    logOnce(key, s);
    FW_LOG(Trace, Algo, "%s of %zu bytes (%s memory): %s (%s)", collectiveName(key.kind), key.bytes,
           key.onDevice ? "device" : "host", algorithmName(s.algorithm), s.rule);
  }
  return s;
}

Selection Selector::planFor(const SelectionKey& key, Algorithm algorithm) const {
  Selection s;
  s.algorithm = algorithm;
  s.rule = kOverrideRule;
  placeProviders(key, &s);
  s.pipeline = &pipeline_;
  return s;
}

// From the algorithm's row: a provider's own collective is that
// provider's alone (NCCL). Otherwise UCX carries every phase (on host
// memory, on device memory, or staged), except that NCCL serves a node
// phase the row lets it where NCCL reaches a node's ranks, and the
// node's segment serves the phases it can carry.
void Selector::placeProviders(const SelectionKey& key, Selection* s) const {
  const AlgorithmRow& row = *rowOf(s->algorithm);
  if (row.placement == Placement::ProviderOwn) {
    s->node = s->rail = Provider::Nccl;
    return;
  }
  s->node = s->rail = key.onDevice ? conditions_.routes.ucx() : Provider::HostUcx;
  const bool hierarchical = row.placement == Placement::NodeThenRails;
  if (hierarchical && row.ncclNodePhase && nodePhaseInNccl(key, conditions_)) {
    s->node = Provider::Nccl;
    return;
  }
  if (!conditions_.segmentServes(key)) return;
  if (hierarchical) s->node = Provider::HostShm;
  if (row.placement == Placement::WholeCallOnNode) s->node = s->rail = Provider::HostShm;  // flat: one provider
}

// Among the collective's algorithms of the row's kind (compressed or
// plain) that can run here, the cheapest the model has a formula for.
std::optional<Algorithm> Selector::cheapestByModel(const SelectionKey& key, bool compressed) const {
  SelectionKey modelled = key;
  modelled.compressed = compressed;  // a compressed allgather's plain phase moves its wire bytes as they are
  const ClusterShape shape = shapeOf(modelled, intra_, inter_, rails_, pipeline_, conditions_);
  std::optional<Algorithm> best;
  double bestUs = 0;
  for (Algorithm a : algorithmsOf(key.kind)) {
    const AlgorithmRow& row = *rowOf(a);
    if (row.compressed != compressed) continue;
    if (row.whyCannotRun != nullptr && row.whyCannotRun(key, conditions_) != nullptr) continue;
    const double us = predictMicros(key.kind, a, key.bytes, shape);
    if (us >= 0 && (!best || us < bestUs)) {
      best = a;
      bestUs = us;
    }
  }
  return best;
}

double Selector::predict(const SelectionKey& key, Algorithm algorithm) const {
  // No need to pay for the shape where the row has no model.
  const AlgorithmRow* row = rowOf(algorithm);
  if (row == nullptr || row->cost == nullptr) return -1;
  return predictMicros(key.kind, algorithm, key.bytes, shapeOf(key, intra_, inter_, rails_, pipeline_, conditions_));
}

void Selector::logOnce(const SelectionKey& key, const Selection& s) const {
  int bucket = 0;
  while ((size_t{1} << bucket) < key.bytes && bucket < 63) ++bucket;
  {
    std::lock_guard<std::mutex> lock(loggedMutex_);
    if (!logged_.insert({static_cast<int>(key.kind), key.onDevice, bucket}).second) return;
  }
  const ClusterShape shape = shapeOf(key, intra_, inter_, rails_, pipeline_, conditions_);
  std::string others;
  const bool compressedReduction = key.compressed && isCompressedAlgorithm(s.algorithm);
  for (Algorithm a : algorithmsOf(key.kind)) {
    if (isCompressedAlgorithm(a) != compressedReduction) continue;
    const double us = predictMicros(key.kind, a, key.bytes, shape);
    if (us < 0) continue;
    char line[64];
    std::snprintf(line, sizeof(line), " %s %.1f", algorithmName(a), us);
    others += line;
  }
  std::string route = std::string(algorithmName(s.algorithm)) + " over " + providerName(s.node);
  if (s.node != s.rail) {
    route = std::string(algorithmName(s.algorithm)) + " (node phase " + providerName(s.node) + ", rail phase " +
            providerName(s.rail) + ")";
  }
  char predicted[48] = "no model";
  const double predictedUs = predict(key, s.algorithm);
  if (predictedUs >= 0) std::snprintf(predicted, sizeof(predicted), "%.1f us", predictedUs);
  const std::string where = key.layout != nullptr ? key.layout->describe() : std::to_string(key.ranks) + " ranks";
  FW_LOG(Info, Algo, "%s of %zu bytes in %s memory on %s: %s (%s), predicted %s%s%s%s", collectiveName(key.kind),
         key.bytes, key.onDevice ? "device" : "host", where.c_str(), route.c_str(), s.rule, predicted,
         others.empty() ? "" : " (model, us:", others.c_str(), others.empty() ? "" : ")");
}

}  // namespace fairway
