// Which node a rank runs on, and where it sits among that node's ranks.
#pragma once

#include <string>
#include <vector>

namespace fairway {

// The host's name; ranks that share it share a machine.
std::string hostName();
// The node this rank counts as: FAIRWAY_NODE_ID when set (one machine posing
// as several nodes), else the host's name.
std::string nodeIdentity(const std::string& nodeIdOverride);

struct NodeLayout {
  int nodeIndex = 0;   // nodes numbered in order of their lowest rank
  int nodeCount = 1;
  int localRank = 0;   // position among the node's ranks, by global rank
  int localSize = 1;
};

NodeLayout computeNodeLayout(const std::vector<std::string>& nodeOfRank, int rank);

}  // namespace fairway
