#include "algorithms/algorithm.h"

namespace fairway {

const char* algorithmName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::Ring: return "ring";
    case Algorithm::Rabenseifner: return "rabenseifner";
    case Algorithm::RecursiveDoubling: return "recursive_doubling";
    case Algorithm::Bruck: return "bruck";
    case Algorithm::Binomial: return "binomial";
    case Algorithm::Pairwise: return "pairwise";
    case Algorithm::Linear: return "linear";
    case Algorithm::Dissemination: return "dissemination";
    case Algorithm::TwoPhase: return "twophase";
    case Algorithm::Leaders: return "leaders";
    case Algorithm::Native: return "nccl";
    case Algorithm::CompressedFlat: return "compressed_flat";
    case Algorithm::CompressedTwoPhase: return "compressed_twophase";
    case Algorithm::SharedMemory: return "shm";
  }
  return "?";
}

bool isCompressedAlgorithm(Algorithm algorithm) {
  return algorithm == Algorithm::CompressedFlat || algorithm == Algorithm::CompressedTwoPhase;
}

}  // namespace fairway
