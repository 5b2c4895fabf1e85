// Folding n ranks into the largest power of two p <= n, for algorithms that
// pair ranks by flipping bits. With n = p + rem, the first 2*rem ranks pair
// up: each even one hands its data to its odd neighbour and sits out, and
// gets the result back at the end. Remaining ranks take virtual ranks 0..p-1.
#pragma once

#include "algorithms/context.h"

namespace fairway {

class PowerOfTwoFold {
 public:
  // Message steps are fixed by position in the schedule, so ranks that sit
  // out agree with their partners: 0 is the fold, then stepsPerRound steps
  // per round, then the unfold.
  PowerOfTwoFold(int rank, int nranks, int stepsPerRound);

  int participants() const { return p_; }
  // This rank's virtual rank, or -1 if it sits out.
  int virtualRank() const { return vrank_; }
  int realRank(int virtualRank) const { return virtualRank < rem_ ? 2 * virtualRank + 1 : virtualRank + rem_; }
  // log2(participants()): the rounds a bit-flipping algorithm runs.
  int rounds() const { return rounds_; }

  // Hands data to the partner (sitting-out ranks) or folds the partner's
  // into data (tmp: count elements of scratch).
  Status fold(CollectiveContext& ctx, void* data, size_t count, void* tmp) const;
  // Returns the finished result to the ranks that sat out.
  Status unfold(CollectiveContext& ctx, void* data, size_t count) const;

 private:
  int rank_, p_, rem_, rounds_, vrank_;
  uint32_t lastStep_;
};

}  // namespace fairway
