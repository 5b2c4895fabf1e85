// One collective call, as the API layer validated it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collective/operations.h"
#include "core/compression.h"
#include "fairway/fairway.h"

namespace fairway {

struct CollectiveArgs {
  CollectiveKind kind = CollectiveKind::Barrier;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // per the API: allreduce count, recvcount, sendcount...
  fwDataType_t datatype = fwUint8;
  fwRedOp_t op = fwSum;
  int root = 0;
  const size_t* sendcounts = nullptr;  // alltoallv only
  const size_t* sdispls = nullptr;
  const size_t* recvcounts = nullptr;
  const size_t* rdispls = nullptr;
  Compression compression;  // allreduce, reduce-scatter, allgather only
  // The list forms (fwAllGatherList, fwReduceScatterList): rank r's block
  // at an address of its own instead of at r * count of recv (allgather)
  // or of send (reduce-scatter), which is then null; one per rank, a copy
  // of the caller's array. Empty otherwise.
  std::vector<char*> recvBlocks;
  std::vector<const char*> sendBlocks;
  bool listForm() const { return !recvBlocks.empty() || !sendBlocks.empty(); }
};

// One call's arguments; byte records by default (what ranks exchange).
inline CollectiveArgs makeArgs(CollectiveKind kind, const void* send, void* recv, size_t count,
                               fwDataType_t datatype = fwUint8, fwRedOp_t op = fwSum, int root = 0) {
  CollectiveArgs args;
  args.kind = kind;
  args.send = send;
  args.recv = recv;
  args.count = count;
  args.datatype = datatype;
  args.op = op;
  args.root = root;
  return args;
}

// The bytes of sendbuff and of recvbuff this rank's call reads or writes
// (0 where a buffer is not used, as recvbuff on a non-root of reduce).
// Only for validated arguments.
void bufferBytes(const CollectiveArgs& args, int rank, int nranks, size_t* sendBytes, size_t* recvBytes);

// 8 bits over what all ranks must agree on, carried in every message tag.
uint8_t collectiveSignature(const CollectiveArgs& args);

}  // namespace fairway
