#include "sim/fabric.h"

namespace fairway::sim {

Fabric::Fabric(const ClusterSpec& spec, int nodes, FlowNetwork* net)
    : spec_(spec), perNode_(spec.ranksPerNode), nics_(spec.nicsPerNode), nodes_(nodes),
      leafLinks_(spec.oversubscription > 1 && nodes > spec.nodesPerLeaf),
      leavesPerRail_((nodes + spec.nodesPerLeaf - 1) / spec.nodesPerLeaf) {
  const double intra = spec.intraGBs * 1e3, nic = spec.nicGBs * 1e3;
  for (int r = 0; r < nodes * perNode_; ++r) {
    rankTx_.push_back(net->addLink(intra, spec.intraLatencyUs, "rank-to-switch"));
    rankRx_.push_back(net->addLink(intra, 0, "switch-to-rank"));
  }
  for (int m = 0; m < nodes; ++m) {
    if (spec.busGBs > 0) bus_.push_back(net->addLink(spec.busGBs * 1e3, 0, "node bus"));
    for (int k = 0; k < nics_; ++k) {
      nicTx_.push_back(net->addLink(nic, spec.nicLatencyUs, "NIC out"));
      nicRx_.push_back(net->addLink(nic, 0, "NIC in"));
    }
  }
  if (leafLinks_) {
    // A rail-optimized fabric has a leaf per rail per group of nodes; a fat
    // tree's leaf serves every NIC of its nodes.
    const int leaves = spec.fabric == ClusterSpec::Fabric::RailOptimized ? leavesPerRail_ * nics_ : leavesPerRail_;
    const int portsPerLeaf = spec.fabric == ClusterSpec::Fabric::RailOptimized ? spec.nodesPerLeaf
                                                                                : spec.nodesPerLeaf * nics_;
    const double up = portsPerLeaf * nic / spec.oversubscription;
    for (int l = 0; l < leaves; ++l) {
      leafUp_.push_back(net->addLink(up, 0, "leaf uplink"));
      leafDown_.push_back(net->addLink(up, 0, "leaf downlink"));
    }
  }
}

int Fabric::leafOf(int node, int nic) const {
  const int group = node / spec_.nodesPerLeaf;
  return spec_.fabric == ClusterSpec::Fabric::RailOptimized ? nic * leavesPerRail_ + group : group;
}

Path Fabric::path(int src, int dst) const {
  Path p;
  const int ms = nodeOf(src), md = nodeOf(dst);
  if (ms == md) {
    p.links[p.hops++] = rankTx_[src];
    p.links[p.hops++] = rankRx_[dst];
    if (!bus_.empty()) p.links[p.hops++] = bus_[ms];
    p.latencyUs = spec_.intraLatencyUs;
    return p;
  }
  const int ks = nicOf(src), kd = nicOf(dst);
  p.links[p.hops++] = nicTx_[ms * nics_ + ks];
  const int ls = leafOf(ms, ks), ld = leafOf(md, kd);
  // One switch on the same leaf; leaf, spine and leaf otherwise.
  const int switches = ls == ld ? 1 : 3;
  if (ls != ld && leafLinks_) {
    p.links[p.hops++] = leafUp_[ls];
    p.links[p.hops++] = leafDown_[ld];
  }
  p.links[p.hops++] = nicRx_[md * nics_ + kd];
  p.latencyUs = spec_.nicLatencyUs + switches * spec_.switchLatencyUs;
  return p;
}

}  // namespace fairway::sim
