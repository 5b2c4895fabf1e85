// Hierarchical small-message collectives through node leaders (local rank
// 0 of every node): the intra-node steps run on the node phase's provider
// (the node's shared-memory segment, or binomial trees) and only
// the leaders cross the network, in log2(M) steps instead of log2(N).
// They need no particular layout: nodes of any size, ranks in any order.
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/registry.h"

namespace fairway {
namespace {

// Step of the extra hop between a root and its node's leader, apart from
// the steps the binomial trees use.
constexpr uint32_t kLeaderHopStep = 1000;

struct LeaderGroups {
  std::vector<int> node;     // this rank's node, by local rank (leader first)
  std::vector<int> leaders;  // local rank 0 of every node, by node
  int nodeIndex = 0;
  bool isLeader = false;
};

// Moves count elements from rank `from` (send) to rank `to` (recv); other
// ranks and from == to do nothing.
Status hop(CollectiveContext& ctx, int from, int to, const void* send, void* recv, size_t count) {
  if (from == to || (ctx.rank() != from && ctx.rank() != to)) return Status::ok();
  Pending* p = ctx.pendings(1);
  FW_RETURN_IF_ERROR(ctx.rank() == from ? ctx.send(to, send, count, kLeaderHopStep, p)
                                        : ctx.recv(from, recv, count, kLeaderHopStep, p));
  return ctx.wait(p);
}

LeaderGroups leaderGroups(const RankLayout& layout, int rank) {
  LeaderGroups g;
  g.nodeIndex = layout.nodeOf(rank);
  g.node = layout.ranksOfNode(g.nodeIndex);
  g.leaders = layout.leaders();
  g.isLeader = layout.localRankOf(rank) == 0;
  return g;
}

}  // namespace

Status leaderAllreduce(CollectiveContext& ctx, const void* send, void* recv, size_t count) {
  const LeaderGroups g = leaderGroups(*ctx.layout(), ctx.rank());
  const Reducer phase = ctx.reducer().withoutFinalize();
  CollectiveContext node = ctx.over(g.node, &phase);
  FW_RETURN_IF_ERROR(ctx.nodePhase().reduce(node, send, recv, count, 0));
  if (g.isLeader) {
    CollectiveContext leaders = ctx.over(g.leaders, &phase);
    FW_RETURN_IF_ERROR(recursiveDoublingAllreduce(leaders, recv, recv, count));
    FW_RETURN_IF_ERROR(ctx.finalize(ctx.reducer(), recv, count));
  }
  return ctx.nodePhase().broadcast(node, recv, count, 0);
}

// buf holds the data on root and receives it everywhere else.
Status leaderBroadcast(CollectiveContext& ctx, void* buf, size_t count, int root) {
  const RankLayout& layout = *ctx.layout();
  const LeaderGroups g = leaderGroups(layout, ctx.rank());
  const int rootNode = layout.nodeOf(root);
  const int rootLeader = layout.ranksOfNode(rootNode).front();
  FW_RETURN_IF_ERROR(hop(ctx, root, rootLeader, buf, buf, count));
  if (g.isLeader) {
    CollectiveContext leaders = ctx.over(g.leaders, nullptr);
    FW_RETURN_IF_ERROR(binomialBroadcast(leaders, buf, count, rootNode));
  }
  CollectiveContext node = ctx.over(g.node, nullptr);
  return ctx.nodePhase().broadcast(node, buf, count, 0);
}

// recv is written on root only.
Status leaderReduce(CollectiveContext& ctx, const void* send, void* recv, size_t count, int root) {
  const RankLayout& layout = *ctx.layout();
  const LeaderGroups g = leaderGroups(layout, ctx.rank());
  const int rootNode = layout.nodeOf(root);
  const int rootLeader = layout.ranksOfNode(rootNode).front();
  const Reducer phase = ctx.reducer().withoutFinalize();
  const size_t bytes = count * ctx.elementSize();
  // Leaders keep their node's partial and the leaders' result apart from recv
  // unless they are the root.
  char* nodePartial = ctx.outerBytes(2 * bytes + 64);
  char* total = ctx.rank() == root ? static_cast<char*>(recv) : nodePartial + bytes;
  CollectiveContext node = ctx.over(g.node, &phase);
  FW_RETURN_IF_ERROR(ctx.nodePhase().reduce(node, send, nodePartial, count, 0));
  if (g.isLeader) {
    CollectiveContext leaders = ctx.over(g.leaders, &phase);
    FW_RETURN_IF_ERROR(binomialReduce(leaders, nodePartial, total, count, rootNode));
  }
  FW_RETURN_IF_ERROR(hop(ctx, rootLeader, root, total, recv, count));
  if (ctx.rank() == root) FW_RETURN_IF_ERROR(ctx.finalize(ctx.reducer(), recv, count));
  return Status::ok();
}

// The leaders' row: allreduce, broadcast and reduce through node leaders,
// on any layout of whole communicators.
namespace {
Status runLeaders(CollectiveContext& ctx, const CollectiveArgs& a) {
  switch (a.kind) {
    case CollectiveKind::AllReduce: return leaderAllreduce(ctx, a.send, a.recv, a.count);
    case CollectiveKind::Reduce: return leaderReduce(ctx, a.send, a.recv, a.count, a.root);
    default:
      if (ctx.rank() == a.root) FW_RETURN_IF_ERROR(ctx.copy(a.recv, a.send, a.count));
      return leaderBroadcast(ctx, a.recv, a.count, a.root);
  }
}

double leadersCostUs(CollectiveKind kind, const CostTerms& t) {
  if (kind == CollectiveKind::AllReduce) {
    return 2 * t.logD * t.in.costUs(t.S) + t.logM * t.out.costUs(t.S) + (t.logD + t.logM) * t.step;
  }
  // Plus one intra-node hop when the root is not its node's leader.
  return (t.logD + 1) * t.in.costUs(t.S) + t.logM * t.out.costUs(t.S);
}

const char* whyLeadersCannotRun(const SelectionKey& key, const SelectionConditions&) {
  return key.layout == nullptr ? "it runs on whole communicators only" : nullptr;
}
}  // namespace

const AlgorithmRow kLeadersRow = {
    "leaders",
    bitOf(CollectiveKind::AllReduce) | bitOf(CollectiveKind::Broadcast) | bitOf(CollectiveKind::Reduce),
    runLeaders,
    leadersCostUs,
    whyLeadersCannotRun,
    Placement::NodeThenRails};

}  // namespace fairway
