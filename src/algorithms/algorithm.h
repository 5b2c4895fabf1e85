// The algorithms by name: what selection chooses and dispatch runs.
#pragma once

namespace fairway {

enum class Algorithm {
  Ring, Rabenseifner, RecursiveDoubling, Bruck, Binomial, Pairwise, Linear, Dissemination, TwoPhase, Leaders,
  Native,  // the provider's own collective over every rank (NCCL)
  // Compressed reduce-scatter and allreduce (compressed_collectives.cc):
  // every rank on its own, or full precision inside nodes. Compressed
  // allgather runs a plain allgather over its wire format.
  CompressedFlat, CompressedTwoPhase,
  // The node's shared-memory provider over a single-node communicator
  // (providers/shm/): allreduce, reduce-scatter, allgather, broadcast, reduce, barrier.
  SharedMemory,
};
bool isCompressedAlgorithm(Algorithm algorithm);
const char* algorithmName(Algorithm algorithm);

}  // namespace fairway
