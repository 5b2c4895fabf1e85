// The links of a simulated cluster and the path of a message between two
// ranks: inside a node, the sender's link to the node's switch, the
// receiver's from it, and the node's bus if it has one; between nodes,
// the sender's NIC, the leaves' uplink and downlink where the two NICs
// hang off different leaves and uplinks are oversubscribed, and the
// receiver's NIC. Rank r is local rank r % ranksPerNode of node
// r / ranksPerNode; local rank d uses NIC d * nics / ranksPerNode.
#pragma once

#include <vector>

#include "sim/cluster_spec.h"
#include "sim/flow_network.h"

namespace fairway::sim {

struct Path {
  int links[FlowNetwork::kMaxHops];
  int hops = 0;
  double latencyUs = 0;  // links and switches, without the message overhead
};

class Fabric {
 public:
  Fabric(const ClusterSpec& spec, int nodes, FlowNetwork* network);
  Path path(int src, int dst) const;
  int nodeOf(int rank) const { return rank / perNode_; }
  int nicOf(int rank) const { return (rank % perNode_) * nics_ / perNode_; }

 private:
  int leafOf(int node, int nic) const;
  const ClusterSpec& spec_;
  int perNode_, nics_, nodes_;
  bool leafLinks_;  // uplinks can be a bottleneck (oversubscribed)
  int leavesPerRail_;
  std::vector<int> rankTx_, rankRx_, bus_, nicTx_, nicRx_, leafUp_, leafDown_;
};

}  // namespace fairway::sim
