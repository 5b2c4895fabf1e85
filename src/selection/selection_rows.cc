#include "selection/selection_rows.h"

namespace fairway {
namespace {

constexpr unsigned kTwoPhaseCollectives =
    bitOf(CollectiveKind::AllReduce) | bitOf(CollectiveKind::ReduceScatter) | bitOf(CollectiveKind::AllGather);
constexpr unsigned kCompressedCollectives = bitOf(CollectiveKind::AllReduce) | bitOf(CollectiveKind::ReduceScatter);
// The collectives the node's segment implements itself.
constexpr unsigned kSegmentCollectives = kTwoPhaseCollectives | bitOf(CollectiveKind::Broadcast) |
                                         bitOf(CollectiveKind::Reduce) | bitOf(CollectiveKind::Barrier) |
                                         bitOf(CollectiveKind::AllToAll);

// Crossovers measured with perf/ on the reference machine; see docs/design/algorithms.md, "How the defaults were chosen".
// Rabenseifner never won by more than the run-to-run spread, so it is
// there for FAIRWAY_ALGO and for topologies where its fewer steps pay.
constexpr size_t kAllreduceRingFromBytes = 16 * 1024;
constexpr size_t kAllgatherRingFromBlockBytes = 1024;
constexpr size_t kNoLimit = ~size_t{0};

SelectionRow fixed(unsigned collectives, unsigned memories, unsigned layouts, size_t from, size_t to,
                   Algorithm algorithm, const char* rule, unsigned needs = kNeedsNothing) {
  SelectionRow row;
  row.collectives = collectives;
  row.memories = memories;
  row.layouts = layouts;
  row.fromBytes = from;
  row.toBytes = to;
  row.needs = needs;
  row.algorithm = algorithm;
  row.rule = rule;
  return row;
}

SelectionRow byModel(unsigned collectives, bool compressed) {
  SelectionRow row = fixed(collectives, kAnyMemory, kUniformNodes, 0, kNoLimit, Algorithm::Ring, "cost model");
  row.compressed = compressed;
  row.byModel = true;
  return row;
}

SelectionRow deviceOneNodeByModel() {
  SelectionRow row = fixed(kAnyCollective, kDeviceMemory, kOneNode, 0, kNoLimit, Algorithm::Ring, "cost model");
  row.byModel = true;
  return row;
}

}  // namespace

const char* const kOverrideRule = "FAIRWAY_ALGO";

// Device rows first: NCCL's own collective, then two-phase with NCCL
// inside nodes; then the node's segment on one node, the cost model
// across uniform nodes, and the measured crossovers everywhere else.
const std::vector<SelectionRow>& defaultRows() {
  using K = CollectiveKind;
  static const std::vector<SelectionRow> rows = [] {
    std::vector<SelectionRow> r = {
        fixed(kAnyCollective, kDeviceMemory, kAnyLayout, 0, kNoLimit, Algorithm::Native, "NCCL reaches every rank",
              kNeedsNcclEverywhere),
        // NCCL inside the node beats any UCX path there, at every size.
        fixed(kTwoPhaseCollectives, kDeviceMemory, kUniformNodes, 0, kNoLimit, Algorithm::TwoPhase,
              "NCCL inside nodes", kNeedsNcclInNodes),
        fixed(kSegmentCollectives, kAnyMemory, kOneNode, 0, kNoLimit, Algorithm::SharedMemory, "the node's segment",
              kNeedsSegment),
        byModel(kAnyCollective, false),
        // Device buffers on one node without NCCL (UCX's CUDA IPC): links
        // far faster than the reference machine's memory, where the model
        // sees the pipeline's message latencies the host crossovers do not.
        deviceOneNodeByModel(),
        fixed(bitOf(K::AllReduce), kAnyMemory, kAnyLayout, 0, kAllreduceRingFromBytes, Algorithm::RecursiveDoubling,
              "measured crossover"),
        fixed(bitOf(K::AllReduce), kAnyMemory, kAnyLayout, kAllreduceRingFromBytes, kNoLimit, Algorithm::Ring,
              "measured crossover"),
        fixed(bitOf(K::AllGather), kAnyMemory, kAnyLayout, 0, kAllgatherRingFromBlockBytes, Algorithm::Bruck,
              "measured crossover"),
        fixed(bitOf(K::AllGather), kAnyMemory, kAnyLayout, kAllgatherRingFromBlockBytes, kNoLimit, Algorithm::Ring,
              "measured crossover"),
        fixed(bitOf(K::ReduceScatter), kAnyMemory, kAnyLayout, 0, kNoLimit, Algorithm::Ring, "default"),
        fixed(bitOf(K::Broadcast) | bitOf(K::Reduce), kAnyMemory, kAnyLayout, 0, kNoLimit, Algorithm::Binomial,
              "default"),
        fixed(bitOf(K::AllToAll) | bitOf(K::AllToAllv), kAnyMemory, kAnyLayout, 0, kNoLimit, Algorithm::Pairwise,
              "default"),
        fixed(bitOf(K::Gather) | bitOf(K::Scatter), kAnyMemory, kAnyLayout, 0, kNoLimit, Algorithm::Linear,
              "default"),
        fixed(bitOf(K::Barrier), kAnyMemory, kAnyLayout, 0, kNoLimit, Algorithm::Dissemination, "default"),
        // Compressed reductions: two-phase where the model says it is
        // cheaper, else every rank on its own.
        byModel(kCompressedCollectives, true),
    };
    SelectionRow flat =
        fixed(kCompressedCollectives, kAnyMemory, kAnyLayout, 0, kNoLimit, Algorithm::CompressedFlat, "default");
    flat.compressed = true;
    r.push_back(flat);
    return r;
  }();
  return rows;
}

SelectionRow overrideRow(CollectiveKind kind, Algorithm algorithm, size_t fromBytes, size_t toBytes, int minRanks,
                         int maxRanks) {
  SelectionRow row = fixed(bitOf(kind), kAnyMemory, kAnyLayout, fromBytes, toBytes, algorithm, kOverrideRule);
  row.minRanks = minRanks;
  row.maxRanks = maxRanks;
  row.compressed = isCompressedAlgorithm(algorithm);  // compressed choices apply to compressed calls only
  return row;
}

RowIndex::RowIndex(const std::vector<SelectionRow>& rows) {
  first_.reserve(kSlots + 1);
  for (unsigned kind = 0; kind < kCollectiveKinds; ++kind) {
    for (unsigned memory = 0; memory < kMemories; ++memory) {
      for (unsigned layout = 0; layout < kLayoutClasses; ++layout) {
        for (int compressed = 0; compressed < 2; ++compressed) {
          for (unsigned routes = 0; routes < kRoutes; ++routes) {
            first_.push_back(static_cast<uint32_t>(rows_.size()));
            for (size_t i = 0; i < rows.size(); ++i) {
              const SelectionRow& row = rows[i];
              if ((row.collectives & (1u << kind)) != 0 && (row.memories & (1u << memory)) != 0 &&
                  (row.layouts & (1u << layout)) != 0 && row.compressed == (compressed == 1) &&
                  (row.needs & ~routes) == 0) {
                rows_.push_back(static_cast<uint16_t>(i));
              }
            }
          }
        }
      }
    }
  }
  first_.push_back(static_cast<uint32_t>(rows_.size()));
}

}  // namespace fairway
