#include "selection/selector.h"

#include <atomic>
#include <optional>
#include <cstdio>
#include <vector>

#include "core/datatype.h"
#include "core/log.h"
#include "selection/cost_model.h"

namespace fairway {
namespace {

struct Candidates {
  CollectiveKind kind;
  std::vector<Algorithm> algorithms;
};

const std::vector<Candidates>& candidates() {
  static const std::vector<Candidates> table = {
      {CollectiveKind::AllReduce,
       {Algorithm::Ring, Algorithm::Rabenseifner, Algorithm::RecursiveDoubling, Algorithm::TwoPhase,
        Algorithm::Leaders, Algorithm::SharedMemory, Algorithm::CompressedFlat, Algorithm::CompressedTwoPhase}},
      {CollectiveKind::ReduceScatter,
       {Algorithm::Ring, Algorithm::TwoPhase, Algorithm::SharedMemory, Algorithm::CompressedFlat,
        Algorithm::CompressedTwoPhase}},
      {CollectiveKind::AllGather,
       {Algorithm::Ring, Algorithm::Bruck, Algorithm::TwoPhase, Algorithm::SharedMemory}},
      {CollectiveKind::Broadcast, {Algorithm::Binomial, Algorithm::Leaders, Algorithm::SharedMemory}},
      {CollectiveKind::Reduce, {Algorithm::Binomial, Algorithm::Leaders, Algorithm::SharedMemory}},
      {CollectiveKind::AllToAll, {Algorithm::Pairwise}},
      {CollectiveKind::AllToAllv, {Algorithm::Pairwise}},
      {CollectiveKind::Gather, {Algorithm::Linear}},
      {CollectiveKind::Scatter, {Algorithm::Linear}},
      {CollectiveKind::Barrier, {Algorithm::Dissemination, Algorithm::SharedMemory}},
  };
  return table;
}

const Algorithm kAllAlgorithms[] = {Algorithm::Ring,      Algorithm::Rabenseifner, Algorithm::RecursiveDoubling,
                                    Algorithm::Bruck,     Algorithm::Binomial,     Algorithm::Pairwise,
                                    Algorithm::Linear,    Algorithm::Dissemination, Algorithm::TwoPhase,
                                    Algorithm::Leaders,   Algorithm::CompressedFlat, Algorithm::CompressedTwoPhase,
                                    Algorithm::SharedMemory};

ClusterShape shapeOf(const SelectionKey& key, const LinkModel& intra, const LinkModel& inter);

// Crossovers measured with perf/ on the reference machine; see docs/DESIGN.md.
// Rabenseifner never won by more than the run-to-run spread, so it is
// there for FAIRWAY_ALGO and for topologies where its fewer steps pay.
constexpr size_t kAllreduceRingFromBytes = 16 * 1024;
constexpr size_t kAllgatherRingFromBlockBytes = 1024;

}  // namespace

DeviceRoutes DeviceRoutes::of(const TransportPlan& plan) {
  DeviceRoutes routes;
  routes.present = plan.intraDevice.has_value();
  const bool ncclInside = plan.intraDevice == Provider::Nccl;
  routes.ncclEverywhere = ncclInside && (plan.nodeCount == 1 || plan.interDevice == Provider::Nccl);
  routes.ncclInNodes = ncclInside && !routes.ncclEverywhere;
  routes.ucxDirect = plan.deviceOverUcx == Provider::DeviceUcx;
  return routes;
}

size_t selectionBytes(const CollectiveArgs& a, int ranks) {
  if (a.kind == CollectiveKind::Barrier) return 0;
  // A compressed allgather runs a plain one over its wire format.
  const size_t element = a.compression.active() && a.kind == CollectiveKind::AllGather
                             ? a.compression.encodedBytes(1)
                             : datatypeSize(a.datatype);
  const size_t bytes = a.count * element;
  return a.kind == CollectiveKind::ReduceScatter ? bytes * static_cast<size_t>(ranks) : bytes;
}

SelectionKey selectionKeyOf(const CollectiveArgs& args, int ranks, const RankLayout* layout, bool onDevice) {
  SelectionKey key;
  key.kind = args.kind;
  key.onDevice = onDevice;
  key.bytes = selectionBytes(args, ranks);
  key.layout = layout;
  key.ranks = ranks;
  key.compressed = args.compression.active();
  if (key.compressed) key.wireRatio = args.compression.wireRatio(datatypeSize(args.datatype));
  return key;
}

Selector::Selector(const Selector& other) { *this = other; }

Selector& Selector::operator=(const Selector& other) {
  if (this == &other) return *this;
  forced_ = other.forced_;
  intra_ = other.intra_;
  inter_ = other.inter_;
  routes_ = other.routes_;
  sharedMemory_ = other.sharedMemory_;
  return *this;
}

Status Selector::create(const std::map<std::string, std::string>& overrides, Selector* out) {
  Selector selector;
  for (const auto& [collective, algorithm] : overrides) {
    const Candidates* entry = nullptr;
    for (const Candidates& c : candidates()) if (collective == collectiveName(c.kind)) entry = &c;
    if (entry == nullptr) {
      return Status(fwInvalidArgument, "FAIRWAY_ALGO names unknown collective '" + collective +
                                           "' (allreduce, reducescatter, allgather, broadcast, reduce, alltoall, "
                                           "alltoallv, gather, scatter, barrier)");
    }
    bool found = false;
    std::string allowed;
    for (Algorithm a : entry->algorithms) {
      allowed += std::string(allowed.empty() ? "" : "|") + algorithmName(a);
      if (algorithm == algorithmName(a)) {
        selector.forced_[entry->kind] = a;
        found = true;
      }
    }
    if (!found) {
      bool known = false;
      for (Algorithm a : kAllAlgorithms) known = known || algorithm == algorithmName(a);
      return Status(fwInvalidArgument, "FAIRWAY_ALGO: " + std::string(known ? "" : "unknown ") + "algorithm '" +
                                           algorithm + "' cannot run " + collective + " (choose " + allowed + ")");
    }
  }
  *out = selector;
  return Status::ok();
}

void Selector::setLinks(const LinkModel& intra, const LinkModel& inter) {
  intra_ = intra;
  inter_ = inter;
}

Selection Selector::select(const SelectionKey& key) const {
  Selection s;
  const CollectiveKind kind = key.kind;
  const auto forced = forced_.find(kind);
  const bool twoPhaseKind =
      kind == CollectiveKind::AllReduce || kind == CollectiveKind::ReduceScatter || kind == CollectiveKind::AllGather;
  const bool acrossUniformNodes = key.layout != nullptr && key.layout->nodeCount() > 1 && key.layout->uniform();
  const bool compressedReduction =
      key.compressed && (kind == CollectiveKind::AllReduce || kind == CollectiveKind::ReduceScatter);
  if (compressedReduction) {
    // Compression runs on the buffers' memory; the rails carry the encoded
    // pieces on device memory (UCX reaching it) or through pinned memory.
    // NCCL serves the node phase of compressed two-phase where it reaches
    // a node's ranks.
    s.algorithm = compressedAlgorithm(key);
    if (!key.onDevice && sharedMemory_ && s.algorithm == Algorithm::CompressedTwoPhase) {
      s.node = Provider::HostShm;  // its full-precision node phase
    }
    if (key.onDevice) {
      s.node = s.rail = routes_.ucx();
      if (s.algorithm == Algorithm::CompressedTwoPhase && routes_.ncclInNodes && key.ncclRunsIt) {
        s.node = Provider::Nccl;
      } else if (s.algorithm == Algorithm::CompressedTwoPhase && !routes_.ucxDirect) {
        // Its node phase would be UCX rings on device memory UCX cannot reach.
        s.algorithm = Algorithm::CompressedFlat;
      }
    }
  } else if (!key.onDevice) {
    s.algorithm = hostAlgorithm(key);
    placeOnSegment(key, &s);
  } else if (forced == forced_.end() && routes_.ncclEverywhere && key.ncclRunsIt) {
    s.algorithm = Algorithm::Native;
    s.node = s.rail = Provider::Nccl;
  } else if (routes_.ncclInNodes && twoPhaseKind && acrossUniformNodes && key.ncclRunsIt &&
             (forced == forced_.end() || forced->second == Algorithm::TwoPhase)) {
    // NCCL reaches only a node's ranks: it serves the node phase.
    s.algorithm = Algorithm::TwoPhase;
    s.node = Provider::Nccl;
    s.rail = routes_.ucx();
  } else {
    s.algorithm = hostAlgorithm(key);
    s.node = s.rail = routes_.ucx();
    placeOnSegment(key, &s);  // staged copies are host memory
  }
  if (logEnabled(LogLevel::Info, LogSubsys::Algo)) logOnce(key, s);
  FW_LOG(Trace, Algo, "%s of %zu bytes (%s memory): %s", collectiveName(kind), key.bytes,
         key.onDevice ? "device" : "host", algorithmName(s.algorithm));
  return s;
}

// FAIRWAY_ALGO, the cost model across uniform nodes, the crossovers on one
// node; two-phase and leaders fall back to the latter where they cannot
// run (a group inside a communicator, one node, nodes of different sizes).
Algorithm Selector::hostAlgorithm(const SelectionKey& key) const {
  const RankLayout* layout = key.layout;
  auto forced = forced_.find(key.kind);
  if (forced != forced_.end() && isCompressedAlgorithm(forced->second)) forced = forced_.end();  // compressed calls only
  std::optional<Algorithm> chosen;
  if (forced != forced_.end()) {
    chosen = forced->second;
  } else if (layout != nullptr && layout->nodeCount() > 1 && layout->uniform()) {
    chosen = cheapestAcrossNodes(key);  // empty: no model of this collective
  }
  if (!chosen) return defaultOnOneNode(key);
  Algorithm algo = *chosen;
  if (algo == Algorithm::SharedMemory) {
    const char* why = layout == nullptr             ? "it runs on whole communicators only"
                      : layout->nodeCount() > 1     ? "the ranks span several nodes (two-phase and leaders use it "
                                                      "inside each node)"
                      : !sharedMemory_              ? "this node has no shared-memory segment (see the INFO log "
                                                      "of communicator creation)"
                      : !segmentServes(key)         ? "UCX moves device buffers directly, not through the segment"
                                                    : nullptr;
    if (why != nullptr) {
      algo = defaultOnOneNode(key);  // for each of these reasons, the point-to-point crossovers
      static std::atomic<unsigned> warned{0};
      const unsigned bit = 1u << static_cast<unsigned>(key.kind);
      if ((warned.fetch_or(bit) & bit) == 0) {
        FW_LOG(Warn, Algo, "%s: shm cannot run because %s; using %s", collectiveName(key.kind), why,
               algorithmName(algo));
      }
    }
    return algo;
  }
  if (algo == Algorithm::TwoPhase || algo == Algorithm::Leaders) {
    const bool twoPhase = algo == Algorithm::TwoPhase;
    // Plain strings: this runs on every call, so nothing is allocated here.
    const char* why = layout == nullptr                      ? "it runs on whole communicators only"
                      : twoPhase && layout->nodeCount() == 1 ? "all ranks are on one node"
                      : twoPhase && !layout->uniform()       ? "the nodes hold different numbers of ranks"
                                                             : nullptr;
    if (why != nullptr) {
      algo = defaultOnOneNode(key);
      static std::atomic<unsigned> warned{0};
      const unsigned bit = 1u << static_cast<unsigned>(key.kind);
      if ((warned.fetch_or(bit) & bit) == 0) {
        FW_LOG(Warn, Algo, "%s: %s cannot run on %s because %s; using the flat algorithms (%s at this size)",
               collectiveName(key.kind), twoPhase ? "twophase" : "leaders",
               layout ? layout->describe().c_str() : "a group", why, algorithmName(algo));
      }
    }
  }
  return algo;
}

// Compressed allreduce and reduce-scatter: FAIRWAY_ALGO's compressed
// choice, else two-phase where the model says it is cheaper. It needs
// uniform nodes of more than one rank and more than one node: on one node
// two-phase would compress nothing, which is not what the caller asked for.
bool Selector::segmentServes(const SelectionKey& key) const {
  return sharedMemory_ && (!key.onDevice || !routes_.ucxDirect);
}

void Selector::placeOnSegment(const SelectionKey& key, Selection* s) const {
  if (!segmentServes(key)) return;
  const Algorithm a = s->algorithm;
  if (a == Algorithm::SharedMemory || a == Algorithm::TwoPhase || a == Algorithm::Leaders) s->node = Provider::HostShm;
  if (a == Algorithm::SharedMemory) s->rail = Provider::HostShm;  // flat: one provider
}

Algorithm Selector::compressedAlgorithm(const SelectionKey& key) const {
  const RankLayout* layout = key.layout;
  const bool hierarchical = layout != nullptr && layout->nodeCount() > 1 && layout->uniform() &&
                            layout->localSizeOf(0) > 1;
  const auto forced = forced_.find(key.kind);
  if (forced != forced_.end() && isCompressedAlgorithm(forced->second)) {
    if (forced->second == Algorithm::CompressedFlat || hierarchical) return forced->second;
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      FW_LOG(Warn, Algo, "%s: compressed_twophase needs several uniform nodes of more than one rank, not %s; "
             "using compressed_flat", collectiveName(key.kind),
             layout != nullptr ? layout->describe().c_str() : "a group");
    }
    return Algorithm::CompressedFlat;
  }
  if (!hierarchical) return Algorithm::CompressedFlat;
  const ClusterShape shape = shapeOf(key, intra_, inter_);
  return predictMicros(key.kind, Algorithm::CompressedTwoPhase, key.bytes, shape) <
                 predictMicros(key.kind, Algorithm::CompressedFlat, key.bytes, shape)
             ? Algorithm::CompressedTwoPhase
             : Algorithm::CompressedFlat;
}

// One node: the shared-memory provider where the node has its segment and
// the call is a whole communicator's; else the point-to-point crossovers.
Algorithm Selector::defaultOnOneNode(const SelectionKey& key) const {
  const CollectiveKind kind = key.kind;
  const size_t bytes = key.bytes;
  const bool shmKind = kind == CollectiveKind::AllReduce || kind == CollectiveKind::ReduceScatter ||
                       kind == CollectiveKind::AllGather || kind == CollectiveKind::Broadcast ||
                       kind == CollectiveKind::Reduce || kind == CollectiveKind::Barrier;
  if (shmKind && segmentServes(key) && key.layout != nullptr && key.layout->nodeCount() == 1) {
    return Algorithm::SharedMemory;
  }
  switch (kind) {
    case CollectiveKind::AllReduce:
      return bytes >= kAllreduceRingFromBytes ? Algorithm::Ring : Algorithm::RecursiveDoubling;
    case CollectiveKind::AllGather:
      return bytes >= kAllgatherRingFromBlockBytes ? Algorithm::Ring : Algorithm::Bruck;
    default:
      for (const Candidates& c : candidates()) if (c.kind == kind) return c.algorithms.front();
  }
  return Algorithm::Ring;
}

namespace {

ClusterShape shapeOf(const SelectionKey& key, const LinkModel& intra, const LinkModel& inter) {
  ClusterShape shape;
  shape.ranks = key.layout != nullptr ? key.layout->size() : key.ranks;
  shape.nodes = key.layout != nullptr ? key.layout->nodeCount() : 1;
  shape.perNode = key.layout != nullptr ? key.layout->localSizeOf(0) : key.ranks;
  shape.intra = intra;
  shape.inter = inter;
  shape.wireRatio = key.compressed ? key.wireRatio : 1;
  return shape;
}

}  // namespace

// Empty where the model has no formula for any candidate. Plain
// algorithms only (a compressed allgather's plain phase is chosen here).
std::optional<Algorithm> Selector::cheapestAcrossNodes(const SelectionKey& key) const {
  SelectionKey plain = key;
  plain.compressed = false;
  const ClusterShape shape = shapeOf(plain, intra_, inter_);
  std::optional<Algorithm> best;
  double bestUs = 0;
  for (const Candidates& c : candidates()) {
    if (c.kind != key.kind) continue;
    for (Algorithm a : c.algorithms) {
      if (isCompressedAlgorithm(a)) continue;
      const double us = predictMicros(key.kind, a, key.bytes, shape);
      if (us >= 0 && (!best || us < bestUs)) {
        best = a;
        bestUs = us;
      }
    }
  }
  return best;
}

double Selector::predict(const SelectionKey& key, Algorithm algorithm) const {
  // No model of NCCL's own or the shared-memory collectives (and no need
  // to pay for the shape on every small call).
  if (algorithm == Algorithm::Native || algorithm == Algorithm::SharedMemory) return -1;
  return predictMicros(key.kind, algorithm, key.bytes, shapeOf(key, intra_, inter_));
}

void Selector::logOnce(const SelectionKey& key, const Selection& s) const {
  int bucket = 0;
  while ((size_t{1} << bucket) < key.bytes && bucket < 63) ++bucket;
  {
    std::lock_guard<std::mutex> lock(loggedMutex_);
    if (!logged_.insert({static_cast<int>(key.kind), key.onDevice, bucket}).second) return;
  }
  const ClusterShape shape = shapeOf(key, intra_, inter_);
  std::string others;
  const bool compressedReduction = key.compressed && isCompressedAlgorithm(s.algorithm);
  for (const Candidates& c : candidates()) {
    if (c.kind != key.kind) continue;
    for (Algorithm a : c.algorithms) {
      if (isCompressedAlgorithm(a) != compressedReduction) continue;
      const double us = predictMicros(key.kind, a, key.bytes, shape);
      if (us < 0) continue;
      char line[64];
      std::snprintf(line, sizeof(line), " %s %.1f", algorithmName(a), us);
      others += line;
    }
  }
  std::string route = std::string(algorithmName(s.algorithm)) + " over " + providerName(s.node);
  if (s.node != s.rail) {
    route = std::string(algorithmName(s.algorithm)) + " (node phase " + providerName(s.node) + ", rail phase " +
            providerName(s.rail) + ")";
  }
  char predicted[48] = "no model";
  const double predictedUs = predict(key, s.algorithm);
  if (predictedUs >= 0) std::snprintf(predicted, sizeof(predicted), "%.1f us", predictedUs);
  const std::string where = key.layout != nullptr ? key.layout->describe() : std::to_string(key.ranks) + " ranks";
  FW_LOG(Info, Algo, "%s of %zu bytes in %s memory on %s: %s, predicted %s%s%s%s", collectiveName(key.kind),
         key.bytes, key.onDevice ? "device" : "host", where.c_str(), route.c_str(), predicted, others.empty() ? "" : " (model, us:", others.c_str(), others.empty() ? "" : ")");
}

}  // namespace fairway
