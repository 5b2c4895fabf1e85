#include "algorithms/power_of_two_fold.h"

namespace fairway {

PowerOfTwoFold::PowerOfTwoFold(int rank, int nranks, int stepsPerRound) : rank_(rank) {
  p_ = 1;
  rounds_ = 0;
  while (p_ * 2 <= nranks) {
    p_ *= 2;
    ++rounds_;
  }
  lastStep_ = static_cast<uint32_t>(1 + stepsPerRound * rounds_);
  rem_ = nranks - p_;
  if (rank < 2 * rem_) {
    vrank_ = rank % 2 == 0 ? -1 : rank / 2;
  } else {
    vrank_ = rank - rem_;
  }
}

Status PowerOfTwoFold::fold(CollectiveContext& ctx, void* data, size_t count, void* tmp) const {
  if (rank_ >= 2 * rem_) return Status::ok();
  Pending* pending = ctx.pendings(1);
  if (rank_ % 2 == 0) {
    FW_RETURN_IF_ERROR(ctx.send(rank_ + 1, data, count, 0, pending));
    return ctx.wait(pending);
  }
  FW_RETURN_IF_ERROR(ctx.recv(rank_ - 1, tmp, count, 0, pending));
  FW_RETURN_IF_ERROR(ctx.wait(pending));
  FW_RETURN_IF_ERROR(ctx.combine(ctx.reducer(), data, data, tmp, count));
  return Status::ok();
}

Status PowerOfTwoFold::unfold(CollectiveContext& ctx, void* data, size_t count) const {
  if (rank_ >= 2 * rem_) return Status::ok();
  Pending* pending = ctx.pendings(1);
  if (rank_ % 2 == 0) {
    FW_RETURN_IF_ERROR(ctx.recv(rank_ + 1, data, count, lastStep_, pending));
  } else {
    FW_RETURN_IF_ERROR(ctx.send(rank_ - 1, data, count, lastStep_, pending));
  }
  return ctx.wait(pending);
}

}  // namespace fairway
