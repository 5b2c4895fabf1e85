// Which algorithm serves a collective of a given size: a default from
// measurements on this project's reference machine (docs/DESIGN.md), or
// the FAIRWAY_ALGO override.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>

#include "algorithms/link_model.h"
#include "comm/collective_args.h"
#include "core/status.h"
#include "topo/rank_layout.h"

namespace fairway {

enum class Algorithm {
  Ring, Rabenseifner, RecursiveDoubling, Bruck, Binomial, Pairwise, Linear, Dissemination, TwoPhase, Leaders,
};

const char* algorithmName(Algorithm algorithm);

class AlgorithmSelector {
 public:
  // Rejects overrides naming an unknown collective, or an algorithm that
  // does not implement that collective.
  static Status create(const std::map<std::string, std::string>& overrides, AlgorithmSelector* out);

  // bytes: the whole buffer (allreduce, reduce-scatter) or one rank's block
  // (allgather). On one node, crossovers measured on the reference machine
  // decide; across uniform nodes, the alpha-beta cost model picks the
  // cheapest candidate, flat or two-phase (printed at INFO, once per
  // collective and power-of-two size). FAIRWAY_ALGO wins over both;
  // two-phase forced on a layout it cannot serve falls back (logged).
  Algorithm choose(CollectiveKind kind, size_t bytes, const RankLayout* layout = nullptr) const;
  // The link parameters of the cost model (FAIRWAY_INTRA_LINK / _INTER_LINK).
  void setLinks(const LinkModel& intra, const LinkModel& inter);
  // What runs on one node, or where two-phase cannot.
  Algorithm defaultOnOneNode(CollectiveKind kind, size_t bytes) const;

 private:
  Algorithm cheapestAcrossNodes(CollectiveKind kind, size_t bytes, const RankLayout& layout) const;

  std::map<CollectiveKind, Algorithm> forced_;
  LinkModel intra_ = kDefaultIntraLink;
  LinkModel inter_ = kDefaultInterLink;
  // Choices already logged: (collective, log2 of the size).
  mutable std::set<std::pair<int, int>> logged_;
};

}  // namespace fairway
