// The driver every perf binary shares: nccl-tests' flags, sweep, timing,
// #wrong check and output columns. A binary describes its collective in a
// PerfCollective and hands it to runPerf().
#pragma once

#include <cstddef>

#include "fairway/fairway.h"

namespace fairway::perf {

struct PerfBuffers {
  void* send;
  void* recv;
  size_t count;  // nccl-tests' count column: elements of the per-rank size
  fwDataType_t datatype;
  fwRedOp_t op;
  int root;
  fwComm_t comm;
  int rank;
  int nranks;
  // -q: the compressed call's descriptor (null: the plain collective).
  const fwCompression_t* compression = nullptr;
  bool onDevice = false;  // -m cuda: the buffers are device memory
};

struct PerfCollective {
  const char* name;
  bool usesOp;
  bool usesRoot;
  // Elements each rank's send and recv buffers hold for nccl-tests' count.
  size_t (*sendElements)(size_t count, int nranks);
  size_t (*recvElements)(size_t count, int nranks);
  // busbw = algbw * busFactor(nranks), nccl-tests' formula.
  double (*busFactor)(int nranks);
  // Where the send data lives inside recv for the in-place run (NULL: the
  // collective has no in-place form; those columns print N/A).
  void* (*inPlaceSend)(const PerfBuffers& b);
  // Where the result goes in the in-place run (NULL: b.recv itself), e.g.
  // reduce-scatter's recvbuff = sendbuff + rank * recvcount.
  void* (*inPlaceRecv)(const PerfBuffers& b);
  fwResult_t (*run)(const PerfBuffers& b);
  // Fills b.send with this rank's input (seed varies it).
  void (*fillInput)(const PerfBuffers& b, int seed);
  // Fills expected with what b.recv must hold afterwards; returns how many
  // elements of recv to compare (0 where this rank receives nothing).
  size_t (*fillExpected)(const PerfBuffers& b, void* expected, int seed);
  // Whether run() takes -q (calls the compressed form when b.compression is set).
  bool compresses = false;
  // The fewest ranks it runs on with -m cuda, and why (sendrecv: 2).
  int minRanksOnDevice = 1;
  const char* whyMinRanksOnDevice = nullptr;
};

// For the collectives whose count is nranks blocks (reduce-scatter's input,
// the whole buffer of allgather, gather, scatter and alltoall): one block's
// elements, and where this rank's block starts in b.recv (nccl-tests'
// in-place position for them).
inline size_t blockElements(size_t count, int nranks) { return count / static_cast<size_t>(nranks); }
void* ownBlockOfRecv(const PerfBuffers& b);
// nccl-tests' busbw factor (n-1)/n: each rank's share that comes from others
// (reduce-scatter, allgather, alltoall, gather, scatter).
inline double shareFromOthers(int nranks) { return static_cast<double>(nranks - 1) / nranks; }

// Parses nccl-tests flags, creates the communicator from the launcher's
// environment, runs the sweep and prints the table on rank 0. Returns the
// process exit status: non-zero on any error or wrong value.
int runPerf(int argc, char** argv, const PerfCollective& collective);

}  // namespace fairway::perf
