// Shared pieces of the two-phase ("fairring") algorithms: the node and rail
// groups of this rank, how a buffer is cut into pipeline slices, and the
// direct exchange along a rail that runs in the background while the next
// slice's intra-node phase works.
#pragma once

#include <vector>

#include "algorithms/context.h"

namespace fairway {

// With D ranks on each of M nodes: this rank is local rank d of node m.
struct TwoPhaseGroups {
  std::vector<int> node;  // communicator ranks of this node, by local rank
  std::vector<int> rail;  // communicator ranks with local rank d, by node
  int d = 0, D = 1, m = 0, M = 1;
  const RankLayout* layout = nullptr;
  int rankAt(int node, int local) const { return layout->ranksOfNode(node)[local]; }
  // Every node's ranks are consecutive and in local-rank order, so a
  // node's blocks of a rank-ordered buffer lie at a fixed stride.
  bool nodesConsecutive = false;
};

// Fails unless layout is uniform (every node has the same number of ranks).
Status twoPhaseGroups(const RankLayout& layout, int rank, TwoPhaseGroups* out);

// What every two-phase algorithm starts from: its groups, and contexts over
// its node and its rail that combine without finalizing (the algorithm
// finalizes once, at its last step). Check status first. Not copyable: the
// contexts refer to the groups.
struct TwoPhaseSetup {
  TwoPhaseSetup(CollectiveContext& ctx, bool reduces)
      : status(twoPhaseGroups(*ctx.layout(), ctx.rank(), &groups)),
        phase(reduces ? ctx.reducer().withoutFinalize() : Reducer(fwUint8, fwSum, 1)),
        node(ctx.over(groups.node, reduces ? &phase : nullptr)),
        rail(ctx.over(groups.rail, reduces ? &phase : nullptr)),
        elementSize(ctx.elementSize()),
        ranks(groups.D * groups.M) {}
  TwoPhaseSetup(const TwoPhaseSetup&) = delete;
  TwoPhaseSetup& operator=(const TwoPhaseSetup&) = delete;

  TwoPhaseGroups groups;  // first: the members below are built from it
  Status status;
  Reducer phase;
  CollectiveContext node;
  CollectiveContext rail;
  size_t elementSize;
  int ranks;
};

// How many slices a dimension of `elements` is cut into: about sliceBytes
// of the whole buffer (wholeBytes) per slice and at least 2 x slicesInFlight
// slices, but never shards (a rank's piece of a slice, elements / slices /
// shardsPerElementRow) under minShardBytes, nor more slices than elements.
size_t sliceCount(const PipelineSettings& p, size_t wholeBytes, size_t elements, size_t shardsPerElementRow,
                  size_t elementSize);

// Posts a direct exchange with every other member of a rail: to member j,
// sendLen(j) elements from sendAt(j); from it, recvLen(j) into recvAt(j).
// Fills 2 * (M - 1) pendings; the caller waits on them later.
template <typename SendAt, typename SendLen, typename RecvAt, typename RecvLen>
Status postRailExchange(CollectiveContext& rail, uint32_t step, Pending* pendings, SendAt sendAt, SendLen sendLen,
                        RecvAt recvAt, RecvLen recvLen) {
  int k = 0;
  for (int j = 0; j < rail.size(); ++j) {
    if (j == rail.rank()) continue;
    FW_RETURN_IF_ERROR(rail.recv(j, recvAt(j), recvLen(j), step, &pendings[k++]));
  }
  for (int j = 0; j < rail.size(); ++j) {
    if (j == rail.rank()) continue;
    FW_RETURN_IF_ERROR(rail.send(j, sendAt(j), sendLen(j), step, &pendings[k++]));
  }
  return Status::ok();
}

}  // namespace fairway
