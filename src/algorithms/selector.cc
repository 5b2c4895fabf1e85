#include "algorithms/selector.h"

#include <vector>

namespace fairway {
namespace {

struct Candidates {
  CollectiveKind kind;
  const char* name;  // as written in FAIRWAY_ALGO
  std::vector<Algorithm> algorithms;
};

const std::vector<Candidates>& candidates() {
  static const std::vector<Candidates> table = {
      {CollectiveKind::AllReduce, "allreduce", {Algorithm::Ring, Algorithm::Rabenseifner, Algorithm::RecursiveDoubling}},
      {CollectiveKind::ReduceScatter, "reducescatter", {Algorithm::Ring}},
      {CollectiveKind::AllGather, "allgather", {Algorithm::Ring, Algorithm::Bruck}},
      {CollectiveKind::Broadcast, "broadcast", {Algorithm::Binomial}},
      {CollectiveKind::Reduce, "reduce", {Algorithm::Binomial}},
      {CollectiveKind::AllToAll, "alltoall", {Algorithm::Pairwise}},
      {CollectiveKind::AllToAllv, "alltoallv", {Algorithm::Pairwise}},
      {CollectiveKind::Gather, "gather", {Algorithm::Linear}},
      {CollectiveKind::Scatter, "scatter", {Algorithm::Linear}},
      {CollectiveKind::Barrier, "barrier", {Algorithm::Dissemination}},
  };
  return table;
}

const Algorithm kAllAlgorithms[] = {Algorithm::Ring, Algorithm::Rabenseifner, Algorithm::RecursiveDoubling, Algorithm::Bruck, Algorithm::Binomial,
                                    Algorithm::Pairwise, Algorithm::Linear, Algorithm::Dissemination};

// Crossovers measured with perf/ on the reference machine; see docs/DESIGN.md.
// Rabenseifner never won by more than the run-to-run spread, so it is
// there for FAIRWAY_ALGO and for topologies where its fewer steps pay.
constexpr size_t kAllreduceRingFromBytes = 16 * 1024;
constexpr size_t kAllgatherRingFromBlockBytes = 32 * 1024;

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

Algorithm AlgorithmSelector::choose(CollectiveKind kind, size_t bytes) const {
  auto forced = forced_.find(kind);
  if (forced != forced_.end()) return forced->second;
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

}  // namespace fairway
