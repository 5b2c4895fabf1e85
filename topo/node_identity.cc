#include "topo/node_identity.h"

#include <unistd.h>

#include <map>

namespace fairway {

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

std::string nodeIdentity(const std::string& nodeIdOverride) {
  return nodeIdOverride.empty() ? hostName() : nodeIdOverride;
}

NodeLayout computeNodeLayout(const std::vector<std::string>& nodeOfRank, int rank) {
  NodeLayout layout;
  // emplace keeps the first index, so nodes are numbered by their lowest rank.
  std::map<std::string, int> nodeIndexOf;
  for (const std::string& node : nodeOfRank) {
    nodeIndexOf.emplace(node, static_cast<int>(nodeIndexOf.size()));
  }
  const std::string& mine = nodeOfRank[rank];
  layout.nodeIndex = nodeIndexOf[mine];
  layout.nodeCount = static_cast<int>(nodeIndexOf.size());
  layout.localRank = 0;
  layout.localSize = 0;
  for (size_t r = 0; r < nodeOfRank.size(); ++r) {
    if (nodeOfRank[r] != mine) continue;
    if (static_cast<int>(r) < rank) ++layout.localRank;
    ++layout.localSize;
  }
  return layout;
}

}  // namespace fairway
