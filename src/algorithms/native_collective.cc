// The row of NCCL's own collective: device buffers where NCCL reaches
// every rank. NCCL runs it (the device path enqueues it on the caller's
// stream), so the row has no run function; only the default table's
// NCCL row chooses it.
#include "algorithms/registry.h"

namespace fairway {
namespace {

const char* whyNcclCannotRun(const SelectionKey& key, const SelectionConditions& conditions) {
  return key.onDevice && conditions.routes.ncclEverywhere && key.ncclRunsIt ? nullptr
                                                                             : "NCCL does not reach every rank";
}

}  // namespace

const AlgorithmRow kNativeRow = {"nccl",
                                 kAnyCollective,
                                 nullptr,
                                 nullptr,
                                 whyNcclCannotRun,
                                 Placement::ProviderOwn,
                                 /*ncclNodePhase=*/false,
                                 /*compressed=*/false,
                                 /*tableOnly=*/true};

}  // namespace fairway
