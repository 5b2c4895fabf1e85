// Each collective described for the correctness sweep: buffer sizes, the
// in-place layout, how to call it, this rank's input and the expected
// output, computed independently of the library (perf/check_data.h).
#pragma once

#include <cstddef>
#include <vector>

#include "fairway/fairway.h"

namespace fairway::testing {

struct CallArgs {
  const void* send;
  void* recv;
  size_t count;
  fwDataType_t datatype;
  fwRedOp_t op;
  int root;
  int rank;
  int nranks;
  fwComm_t comm;
  fwStream_t stream;  // blocking calls' stream: NULL for host buffers
};

struct CollectiveCase {
  const char* name;
  // FAIRWAY_ALGO for the run (nullptr: the size-based default), so every
  // algorithm meets every count, not just the sizes it is chosen for.
  const char* algorithm;
  bool reduces;
  bool rooted;
  bool hasInPlace;
  // Elements of send and recv on this rank (0: the rank passes NULL).
  size_t (*sendElements)(size_t count, int nranks, int rank, int root);
  size_t (*recvElements)(size_t count, int nranks, int rank, int root);
  // For the in-place call: send and recv as offsets (elements) into one
  // buffer of max(send, recv) elements.
  void (*inPlaceOffsets)(size_t count, int rank, int root, size_t* sendOffset, size_t* recvOffset);
  fwResult_t (*call)(const CallArgs& a, fwRequest_t* request);  // request NULL: blocking
  void (*fillInput)(void* send, const CallArgs& a, int seed);
  // Writes what recv must hold; returns its element count.
  size_t (*fillExpected)(void* expected, const CallArgs& a, int seed);
};

const std::vector<CollectiveCase>& collectiveCases();

}  // namespace fairway::testing
