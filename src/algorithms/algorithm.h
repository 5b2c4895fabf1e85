// The algorithms by id: what selection chooses and dispatch runs. Each
// has one row in the registry (registry.h), next to its code.
#pragma once

#include <cstdint>

namespace fairway {

// Every built-in algorithm: its id and the name of its row (defined in the
// algorithm's own file). Adding one is a new file holding its code and its
// row, and one line here; an algorithm registered at run time
// (registerAlgorithm) needs only its file.
#define FAIRWAY_BUILTIN_ALGORITHMS(X)                                                      \
  X(Ring, kRingRow)                                                                        \
  X(Rabenseifner, kRabenseifnerRow)                                                        \
  X(RecursiveDoubling, kRecursiveDoublingRow)                                              \
  X(Bruck, kBruckRow)                                                                      \
  X(Binomial, kBinomialRow)                                                                \
  X(Pairwise, kPairwiseRow)                                                                \
  X(Linear, kLinearRow)                                                                    \
  X(Dissemination, kDisseminationRow)                                                      \
  X(TwoPhase, kTwoPhaseRow)                                                                \
  X(Leaders, kLeadersRow)                                                                  \
  /* the whole call on the node's shared-memory segment (one node) */                      \
  X(SharedMemory, kSharedMemoryRow)                                                        \
  /* compressed reduce-scatter and allreduce: every rank on its own, or full */            \
  /* precision inside nodes (a compressed allgather runs a plain algorithm) */             \
  X(CompressedFlat, kCompressedFlatRow)                                                    \
  X(CompressedTwoPhase, kCompressedTwoPhaseRow)                                            \
  /* the provider's own collective over every rank (NCCL) */                               \
  X(Native, kNativeRow)                                           

enum class Algorithm : uint16_t {
#define FW_ALGORITHM_ID(id, row) id,
  FAIRWAY_BUILTIN_ALGORITHMS(FW_ALGORITHM_ID)
#undef FW_ALGORITHM_ID
};
#define FW_ALGORITHM_COUNT(id, row) +1
// Registered algorithms take the ids from here on.
constexpr int kBuiltinAlgorithms = 0 FAIRWAY_BUILTIN_ALGORITHMS(FW_ALGORITHM_COUNT);
#undef FW_ALGORITHM_COUNT

// The row's name ("ring", "twophase", ...), as FAIRWAY_ALGO and the logs
// write it; "?" for an id no row has.
const char* algorithmName(Algorithm algorithm);
// Whether it serves compressed reductions (and only those).
bool isCompressedAlgorithm(Algorithm algorithm);

}  // namespace fairway
