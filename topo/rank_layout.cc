#include "topo/rank_layout.h"

#include <algorithm>
#include <map>

namespace fairway {

RankLayout::RankLayout(const std::vector<std::string>& nodeOfRank)
    : nodeOf_(nodeOfRank.size()), localRankOf_(nodeOfRank.size()) {
  std::map<std::string, int> indexOfName;
  for (size_t r = 0; r < nodeOfRank.size(); ++r) {
    auto inserted = indexOfName.emplace(nodeOfRank[r], static_cast<int>(ranksOfNode_.size()));
    if (inserted.second) {
      ranksOfNode_.emplace_back();
      nodeNames_.push_back(nodeOfRank[r]);
    }
    int node = inserted.first->second;
    nodeOf_[r] = node;
    localRankOf_[r] = static_cast<int>(ranksOfNode_[node].size());
    ranksOfNode_[node].push_back(static_cast<int>(r));
  }
}

bool RankLayout::uniform() const {
  for (const auto& ranks : ranksOfNode_) {
    if (ranks.size() != ranksOfNode_.front().size()) return false;
  }
  return true;
}

bool RankLayout::blocked() const {
  if (!uniform()) return false;
  const int perNode = static_cast<int>(ranksOfNode_.front().size());
  for (int r = 0; r < size(); ++r) {
    if (nodeOf_[r] != r / perNode) return false;
  }
  return true;
}

std::vector<int> RankLayout::leaders() const {
  std::vector<int> out;
  for (const auto& ranks : ranksOfNode_) out.push_back(ranks.front());
  return out;
}

int RankLayout::railCount() const {
  size_t widest = 0;
  for (const auto& ranks : ranksOfNode_) widest = std::max(widest, ranks.size());
  return static_cast<int>(widest);
}

std::vector<int> RankLayout::rail(int localRank) const {
  std::vector<int> out;
  for (const auto& ranks : ranksOfNode_) {
    if (localRank < static_cast<int>(ranks.size())) out.push_back(ranks[localRank]);
  }
  return out;
}

std::string RankLayout::describe() const {
  std::string text = std::to_string(nodeCount()) + (nodeCount() == 1 ? " node" : " nodes");
  if (uniform()) return text + " x " + std::to_string(ranksOfNode_.front().size()) + " ranks";
  text += " with ";
  for (size_t n = 0; n < ranksOfNode_.size(); ++n) {
    text += (n ? "+" : "") + std::to_string(ranksOfNode_[n].size());
  }
  return text + " ranks";
}

}  // namespace fairway
