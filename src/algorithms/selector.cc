#include "algorithms/selector.h"

#include <cstdio>
#include <vector>

#include "algorithms/cost_model.h"
#include "core/log.h"

namespace fairway {
namespace {

struct Candidates {
  CollectiveKind kind;
  const char* name;  // as written in FAIRWAY_ALGO
  std::vector<Algorithm> algorithms;
};

const std::vector<Candidates>& candidates() {
  static const std::vector<Candidates> table = {
      {CollectiveKind::AllReduce, "allreduce",
       {Algorithm::Ring, Algorithm::Rabenseifner, Algorithm::RecursiveDoubling, Algorithm::TwoPhase,
        Algorithm::Leaders}},
      {CollectiveKind::ReduceScatter, "reducescatter", {Algorithm::Ring, Algorithm::TwoPhase}},
      {CollectiveKind::AllGather, "allgather", {Algorithm::Ring, Algorithm::Bruck, Algorithm::TwoPhase}},
      {CollectiveKind::Broadcast, "broadcast", {Algorithm::Binomial, Algorithm::Leaders}},
      {CollectiveKind::Reduce, "reduce", {Algorithm::Binomial, Algorithm::Leaders}},
      {CollectiveKind::AllToAll, "alltoall", {Algorithm::Pairwise}},
      {CollectiveKind::AllToAllv, "alltoallv", {Algorithm::Pairwise}},
      {CollectiveKind::Gather, "gather", {Algorithm::Linear}},
      {CollectiveKind::Scatter, "scatter", {Algorithm::Linear}},
      {CollectiveKind::Barrier, "barrier", {Algorithm::Dissemination}},
  };
  return table;
}

const Algorithm kAllAlgorithms[] = {Algorithm::Ring, Algorithm::Rabenseifner, Algorithm::RecursiveDoubling, Algorithm::Bruck, Algorithm::Binomial,
                                    Algorithm::Pairwise, Algorithm::Linear, Algorithm::Dissemination, Algorithm::TwoPhase,
                                    Algorithm::Leaders};

// Crossovers measured with perf/ on the reference machine; see docs/DESIGN.md.
// Rabenseifner never won by more than the run-to-run spread, so it is
// there for FAIRWAY_ALGO and for topologies where its fewer steps pay.
constexpr size_t kAllreduceRingFromBytes = 16 * 1024;
constexpr size_t kAllgatherRingFromBlockBytes = 1024;

}  // namespace

const char* algorithmName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::Ring: return "ring";
    case Algorithm::Rabenseifner: return "rabenseifner";
    case Algorithm::RecursiveDoubling: return "recursive_doubling";
    case Algorithm::Bruck: return "bruck";
    case Algorithm::Binomial: return "binomial";
    case Algorithm::Pairwise: return "pairwise";
    case Algorithm::Linear: return "linear";
    case Algorithm::Dissemination: return "dissemination";
    case Algorithm::TwoPhase: return "twophase";
    case Algorithm::Leaders: return "leaders";
  }
  return "?";
}

const char* collectiveName(CollectiveKind kind) {
  for (const Candidates& c : candidates()) if (c.kind == kind) return c.name;
  return "?";
}

Status AlgorithmSelector::create(const std::map<std::string, std::string>& overrides, AlgorithmSelector* out) {
  AlgorithmSelector selector;
  for (const auto& [collective, algorithm] : overrides) {
    const Candidates* entry = nullptr;
    for (const Candidates& c : candidates()) if (collective == c.name) entry = &c;
    if (entry == nullptr) {
      return Status(fwInvalidArgument, "FAIRWAY_ALGO names unknown collective '" + collective +
                                           "' (allreduce, reducescatter, allgather, broadcast, reduce, alltoall, "
                                           "alltoallv, gather, scatter, barrier)");
    }
    bool found = false;
    std::string allowed;
    for (Algorithm a : entry->algorithms) {
      allowed += std::string(allowed.empty() ? "" : "|") + algorithmName(a);
      if (algorithm == algorithmName(a)) {
        selector.forced_[entry->kind] = a;
        found = true;
      }
    }
    if (!found) {
      bool known = false;
      for (Algorithm a : kAllAlgorithms) known = known || algorithm == algorithmName(a);
      return Status(fwInvalidArgument, "FAIRWAY_ALGO: " + std::string(known ? "" : "unknown ") + "algorithm '" +
                                           algorithm + "' cannot run " + collective + " (choose " + allowed + ")");
    }
  }
  *out = selector;
  return Status::ok();
}

Algorithm AlgorithmSelector::choose(CollectiveKind kind, size_t bytes, const RankLayout* layout) const {
  auto forced = forced_.find(kind);
  if (forced != forced_.end()) return forced->second;
  if (layout != nullptr && layout->nodeCount() > 1 && layout->uniform()) {
    Algorithm best = cheapestAcrossNodes(kind, bytes, *layout);
    if (best != Algorithm::Dissemination) return best;  // the model covered this collective
  }
  return defaultOnOneNode(kind, bytes);
}

void AlgorithmSelector::setLinks(const LinkModel& intra, const LinkModel& inter) {
  intra_ = intra;
  inter_ = inter;
}

Algorithm AlgorithmSelector::defaultOnOneNode(CollectiveKind kind, size_t bytes) const {
  switch (kind) {
    case CollectiveKind::AllReduce:
      return bytes >= kAllreduceRingFromBytes ? Algorithm::Ring : Algorithm::RecursiveDoubling;
    case CollectiveKind::AllGather:
      return bytes >= kAllgatherRingFromBlockBytes ? Algorithm::Ring : Algorithm::Bruck;
    default:
      for (const Candidates& c : candidates()) if (c.kind == kind) return c.algorithms.front();
  }
  return Algorithm::Ring;
}

// Dissemination stands for "no model for this collective".
Algorithm AlgorithmSelector::cheapestAcrossNodes(CollectiveKind kind, size_t bytes, const RankLayout& layout) const {
  ClusterShape shape;
  shape.ranks = layout.size();
  shape.nodes = layout.nodeCount();
  shape.perNode = layout.localSizeOf(0);
  shape.intra = intra_;
  shape.inter = inter_;
  Algorithm best = Algorithm::Dissemination;
  double bestUs = 0;
  for (const Candidates& c : candidates()) {
    if (c.kind != kind) continue;
    for (Algorithm a : c.algorithms) {
      double us = predictMicros(kind, a, bytes, shape);
      if (us >= 0 && (best == Algorithm::Dissemination || us < bestUs)) {
        best = a;
        bestUs = us;
      }
    }
  }
  if (best == Algorithm::Dissemination || !logEnabled(LogLevel::Info, LogSubsys::Algo)) return best;
  int bucket = 0;
  while ((size_t{1} << bucket) < bytes && bucket < 63) ++bucket;
  if (logged_.insert({static_cast<int>(kind), bucket}).second) {
    std::string all;
    for (const Candidates& c : candidates()) {
      if (c.kind != kind) continue;
      for (Algorithm a : c.algorithms) {
        double us = predictMicros(kind, a, bytes, shape);
        if (us < 0) continue;
        char line[64];
        std::snprintf(line, sizeof(line), " %s %.1f", algorithmName(a), us);
        all += line;
      }
    }
    FW_LOG(Info, Algo, "%s of %zu bytes on %s: %s, predicted %.1f us (us:%s)", collectiveName(kind), bytes,
           layout.describe().c_str(), algorithmName(best), bestUs, all.c_str());
  }
  return best;
}

}  // namespace fairway
