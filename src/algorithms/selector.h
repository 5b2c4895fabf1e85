// Which algorithm serves a collective of a given size: a default from
// measurements on this project's reference machine (docs/DESIGN.md), or
// the FAIRWAY_ALGO override.
#pragma once

#include <map>
#include <string>

#include "comm/collective_args.h"
#include "core/status.h"

namespace fairway {

enum class Algorithm { Ring, Rabenseifner, RecursiveDoubling, Bruck, Binomial, Pairwise, Linear, Dissemination };

const char* algorithmName(Algorithm algorithm);

class AlgorithmSelector {
 public:
  // Rejects overrides naming an unknown collective, or an algorithm that
  // does not implement that collective.
  static Status create(const std::map<std::string, std::string>& overrides, AlgorithmSelector* out);

  // bytes: the whole buffer (allreduce) or one rank's block (allgather).
  Algorithm choose(CollectiveKind kind, size_t bytes) const;

 private:
  std::map<CollectiveKind, Algorithm> forced_;
};

}  // namespace fairway
