// How the ranks of a communicator sit on nodes, and the groups derived from
// that: the ranks of each node, local rank and size, node leaders, and rails
// (the ranks with the same local rank on every node, which two-phase
// algorithms use to spread inter-node traffic over every NIC of a node).
//
// Nothing here assumes the ranks of a node are contiguous or that every node
// has the same number of them.
#pragma once

#include <string>
#include <vector>

namespace fairway {

class RankLayout {
 public:
  RankLayout() = default;
  // nodeOfRank[r]: the node identity rank r reported. Nodes are numbered in
  // order of their lowest rank; local ranks follow global rank order.
  explicit RankLayout(const std::vector<std::string>& nodeOfRank);

  int size() const { return static_cast<int>(nodeOf_.size()); }
  int nodeCount() const { return static_cast<int>(ranksOfNode_.size()); }
  int nodeOf(int rank) const { return nodeOf_[rank]; }
  int localRankOf(int rank) const { return localRankOf_[rank]; }
  int localSizeOf(int rank) const { return static_cast<int>(ranksOfNode_[nodeOf_[rank]].size()); }
  const std::vector<int>& ranksOfNode(int node) const { return ranksOfNode_[node]; }
  const std::string& nodeName(int node) const { return nodeNames_[node]; }

  // Every node has the same number of ranks.
  bool uniform() const;
  // Ranks of node contiguous and in node order (rank = node * D + local).
  bool blocked() const;
  // Local rank 0 of every node, in node order.
  std::vector<int> leaders() const;
  // Number of rails: the largest local size.
  int railCount() const;
  // Ranks with local rank d, one per node that has one, in node order.
  std::vector<int> rail(int localRank) const;
  // "2 nodes x 4 ranks" or "3 nodes with 2+3+1 ranks".
  std::string describe() const;

 private:
  std::vector<int> nodeOf_;
  std::vector<int> localRankOf_;
  std::vector<std::vector<int>> ranksOfNode_;
  std::vector<std::string> nodeNames_;
};

}  // namespace fairway
