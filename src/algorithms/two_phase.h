// Shared pieces of the two-phase ("fairring") algorithms: the node and rail
// groups of this rank, how a buffer is cut into pipeline slices, and the
// direct exchange along a rail that runs in the background while the next
// slice's intra-node phase works.
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

#include "algorithms/context.h"
#include "algorithms/selection_key.h"

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

// Why a two-phase algorithm (plain or compressed) cannot run `key`'s
// layout, or null: whole communicators of several nodes, each holding
// the same number of ranks.
const char* whyTwoPhaseLayoutRefuses(const SelectionKey& key);

// How many slices a dimension of `elements` is cut into: about sliceBytes
// of the whole buffer (wholeBytes) per slice and at least 2 x slicesInFlight
// slices, but never shards (a rank's piece of a slice, elements / slices /
// shardsPerElementRow) under minShardBytes, nor more slices than elements.
size_t sliceCount(const PipelineSettings& p, size_t wholeBytes, size_t elements, size_t shardsPerElementRow,
                  size_t elementSize);

// The direct exchange with every other member of a rail, in rounds. Round
// r pairs this rank with the members r x k + 1 to (r + 1) x k places on
// along the rail (it sends to them) and as many places back (it receives
// from them), k = PipelineSettings::railPeersInFlight. Both ends of a
// message fall in the same round, so a round's messages always meet. A
// rank then holds 2k requests, and its NIC 2k flows, however many nodes
// the job has: 2,048 nodes would otherwise post 4,094 per slice at once,
// each a request in the transport and a flow into an incast of 2,047.
// With M - 1 <= k (the default's 256 covers 257 nodes) it is one round,
// posted at once, as it always was.
//
// start() posts round 0; finish() waits for each round and posts the
// next, then waits for the last. The places are kept (as copies) between
// the two, so they must not refer to the caller's stack.
class RailExchange {
 public:
  using SendPlace = std::function<const void*(int member)>;
  using RecvPlace = std::function<void*(int member)>;
  using Length = std::function<size_t(int member)>;

  // Requests one exchange on a rail of `members` holds at once.
  static size_t pendingsFor(int members, int peersInFlight) {
    return 2 * static_cast<size_t>(std::min(std::max(1, peersInFlight), std::max(0, members - 1)));
  }
  Status start(CollectiveContext& rail, uint32_t step, Pending* pendings, SendPlace sendAt, Length sendLen,
               RecvPlace recvAt, Length recvLen) {
    rail_ = &rail;
    step_ = step;
    pendings_ = pendings;
    perRound_ = std::max(1, rail.pipeline().railPeersInFlight);
    sendAt_ = std::move(sendAt);
    sendLen_ = std::move(sendLen);
    recvAt_ = std::move(recvAt);
    recvLen_ = std::move(recvLen);
    round_ = 0;
    return post();
  }
  Status finish() {
    if (rail_ == nullptr) return Status(fwInternalError, "a rail exchange finished before it started");
    for (;;) {
      FW_RETURN_IF_ERROR(rail_->waitAll(pendings_, posted_));
      if (last()) break;
      ++round_;
      FW_RETURN_IF_ERROR(post());
    }
    rail_ = nullptr;
    return Status::ok();
  }

 private:
  bool last() const { return (round_ + 1) * static_cast<size_t>(perRound_) >= static_cast<size_t>(rail_->size() - 1); }
  Status post() {
    const int M = rail_->size(), self = rail_->rank();
    const int first = static_cast<int>(round_ * perRound_) + 1;
    const int end = std::min(M - 1, first + perRound_ - 1);
    posted_ = 0;
    for (int delta = first; delta <= end; ++delta) {
      const int from = (self - delta + M) % M;
      FW_RETURN_IF_ERROR(rail_->recv(from, recvAt_(from), recvLen_(from), step_, &pendings_[posted_++]));
    }
    for (int delta = first; delta <= end; ++delta) {
      const int to = (self + delta) % M;
      FW_RETURN_IF_ERROR(rail_->send(to, sendAt_(to), sendLen_(to), step_, &pendings_[posted_++]));
    }
    return Status::ok();
  }

  CollectiveContext* rail_ = nullptr;
  uint32_t step_ = 0;
  Pending* pendings_ = nullptr;
  size_t posted_ = 0;
  size_t round_ = 0;
  int perRound_ = 1;
  SendPlace sendAt_;
  Length sendLen_;
  RecvPlace recvAt_;
  Length recvLen_;
};

}  // namespace fairway
