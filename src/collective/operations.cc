#include "collective/operations.h"

namespace fairway {
namespace {

using K = CollectiveKind;
// type, name, collective, kind, reduces, rooted, compresses, list form
constexpr OperationRow kOperations[] = {
    {fwOpAllReduce, "allreduce", true, K::AllReduce, true, false, true, false},
    {fwOpReduceScatter, "reducescatter", true, K::ReduceScatter, true, false, true, true},
    {fwOpAllGather, "allgather", true, K::AllGather, false, false, true, true},
    {fwOpBroadcast, "broadcast", true, K::Broadcast, false, true, false, false},
    {fwOpReduce, "reduce", true, K::Reduce, true, true, false, false},
    {fwOpAllToAll, "alltoall", true, K::AllToAll, false, false, false, false},
    {fwOpAllToAllv, "alltoallv", true, K::AllToAllv, false, false, false, false},
    {fwOpGather, "gather", true, K::Gather, false, true, false, false},
    {fwOpScatter, "scatter", true, K::Scatter, false, true, false, false},
    {fwOpBarrier, "barrier", true, K::Barrier, false, false, false, false},
    {fwOpSend, "send", false, K::Barrier, false, false, false, false},
    {fwOpRecv, "recv", false, K::Barrier, false, false, false, false},
};
static_assert(sizeof(kOperations) / sizeof(kOperations[0]) == fwNumOpTypes, "a row per operation");

constexpr bool rowsInOrder() {
  for (int i = 0; i < fwNumOpTypes; ++i) {
    if (kOperations[i].type != i) return false;
    if (kOperations[i].collective && static_cast<int>(kOperations[i].kind) != i) return false;
  }
  return true;
}
static_assert(rowsInOrder(), "rows in fwOpType_t's order, a collective's kind numbered as its type");
static_assert(kCollectiveKinds == fwOpBarrier + 1, "every collective kind is an operation");

}  // namespace

const OperationRow& operationRow(fwOpType_t type) { return kOperations[type]; }

const OperationRow& operationRow(CollectiveKind kind) { return kOperations[static_cast<int>(kind)]; }

const char* collectiveName(CollectiveKind kind) {
  const int k = static_cast<int>(kind);
  return k >= 0 && k < kCollectiveKinds ? kOperations[k].name : "?";
}

}  // namespace fairway
