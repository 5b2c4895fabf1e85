// The operations of the C API, one row each in fwOpType_t's order: what
// fwPost, validation, the collective layer, the flight record and
// fairway-sim ask of an operation (its name, whether it is a collective,
// whether it reduces, whether it has a root, which special forms it has).
// Nothing else spells these facts out.
#pragma once

#include "fairway/fairway.h"

namespace fairway {

enum class CollectiveKind {
  AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AllToAll, AllToAllv, Gather, Scatter, Barrier,
};
constexpr int kCollectiveKinds = static_cast<int>(CollectiveKind::Barrier) + 1;
// Sets of collectives, as bit masks.
constexpr unsigned bitOf(CollectiveKind kind) { return 1u << static_cast<unsigned>(kind); }
constexpr unsigned kAnyCollective = (1u << kCollectiveKinds) - 1;

// As FAIRWAY_ALGO and the logs write it: "allreduce", "reducescatter", ...
const char* collectiveName(CollectiveKind kind);

struct OperationRow {
  fwOpType_t type;
  const char* name;     // "allreduce": fwPost's messages, FAIRWAY_ALGO, FAIRWAY_COMPRESS and the logs
  bool collective;      // false: a message (send, recv)
  CollectiveKind kind;  // a collective's kind (the same number as its type)
  bool reduces;         // takes an fwRedOp_t
  bool rooted;          // takes a root
  bool compresses;      // has compressed forms (fwAllReduceCompressed, ...)
  bool listForm;        // has a list form (recvbuffs for allgather, sendbuffs for reduce-scatter)
};

// type must be in [0, fwNumOpTypes): callers check a caller's value first.
const OperationRow& operationRow(fwOpType_t type);
const OperationRow& operationRow(CollectiveKind kind);

}  // namespace fairway
