#include "selection/cost_model.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "algorithms/two_phase.h"

namespace fairway {

Status LinkModel::parse(const std::string& variable, const std::string& text, LinkModel* out) {
  const char* start = text.c_str();
  char* end = nullptr;
  errno = 0;
  double alpha = std::strtod(start, &end);
  // strtod also reads "inf" and "nan": a link needs finite numbers.
  bool ok = errno == 0 && end != start && *end == ',' && std::isfinite(alpha) && alpha >= 0;
  double beta = 0;
  if (ok) {
    const char* betaText = end + 1;
    beta = std::strtod(betaText, &end);
    ok = errno == 0 && end != betaText && *end == '\0' && std::isfinite(beta) && beta > 0;
  }
  if (!ok) {
    return Status(fwInvalidArgument, variable + "=" + text +
                                         " is not ALPHA_US,GBPS (latency in microseconds and bandwidth in GB/s, "
                                         "e.g. 10,1.25)");
  }
  *out = LinkModel{alpha, beta};
  return Status::ok();
}

namespace {

// A chunk a ring step moves in segments of the pipeline's size, `depth` of
// them in flight: the link's time for the bytes, or, where the latency
// of each segment outweighs its transfer, the segments' latencies spread
// over the window.
double segmentedUs(const LinkModel& link, double chunk, const PipelineSettings& p) {
  const double segment = static_cast<double>(std::max<size_t>(1, p.segmentBytes));
  const double pieces = std::ceil(chunk / segment);
  if (pieces <= 1) return link.costUs(chunk);
  const double window = std::min(pieces, static_cast<double>(std::max(1, p.depth)));
  return std::max(link.costUs(chunk), pieces * link.costUs(segment) / window);
}

// The pieces a ring step cuts a chunk into (the pipeline's segments).
double piecesOf(double chunk, const PipelineSettings& p) {
  return std::max(1.0, std::ceil(chunk / static_cast<double>(std::max<size_t>(1, p.segmentBytes))));
}

// A ring step that reduces: every piece received is combined before it is
// forwarded, one call after another on the rank (launchUs each), while
// later pieces cross the link. The slower of the two paces the step, and
// the last piece's call follows its transfer. Where a call costs more than
// a piece's transfer (a kernel launch against NVLink), the calls decide.
double reducingStepUs(const LinkModel& link, double chunk, const PipelineSettings& p, double launchUs) {
  return std::max(segmentedUs(link, chunk, p), (piecesOf(chunk, p) - 1) * launchUs) + launchUs;
}

// Two-phase's phases over `slices` pipelined slices: each slice pays the
// phases' latencies, and a slice's node phase overlaps earlier slices'
// rail exchanges, so the longer phase dominates.
double overlappedUs(double nodeUs, double railUs, double slices) {
  return std::max(nodeUs, railUs) + std::min(nodeUs, railUs) / std::max(1.0, slices);
}

}  // namespace

double predictMicros(CollectiveKind kind, Algorithm algorithm, size_t bytes, const ClusterShape& shape) {
  const double n = shape.ranks, M = shape.nodes, D = shape.perNode, S = static_cast<double>(bytes);
  // Flat algorithms on several nodes pay the inter-node link at every step.
  const LinkModel& flat = shape.nodes > 1 ? shape.inter : shape.intra;
  const double logN = std::ceil(std::log2(std::max(1.0, n)));
  const double logD = std::ceil(std::log2(std::max(1.0, D)));
  const double logM = std::ceil(std::log2(std::max(1.0, M)));
  const LinkModel& in = shape.intra;
  const LinkModel& out = shape.inter;
  const double r = shape.wireRatio;
  // The NICs a node's concurrent senders spread over (never more than its ranks).
  const double R = std::max(1.0, std::min(static_cast<double>(shape.rails), D));
  const PipelineSettings& p = shape.pipeline;
  // Slices of two-phase allreduce (two_phase.cc's count, over bytes as elements).
  const double arSlices = static_cast<double>(sliceCount(p, bytes, bytes, shape.ranks, 1));
  // Slices of two-phase reduce-scatter (strided node rings: the whole
  // buffer's bytes over M per slice) and allgather.
  const double rsSlices = static_cast<double>(sliceCount(p, bytes / shape.nodes, bytes / shape.ranks, 1, 1));
  const double agSlices = static_cast<double>(sliceCount(p, bytes * shape.ranks, bytes, 1, 1));
  // Copy and reduction calls that wait for each other, at shape.stepUs
  // each: a tree's per level, an allgather's copy of its own block (and
  // Bruck's two for its final rotation), a reducing ring's per piece
  // (reducingStepUs); two-phase per slice: stage B's per received shard
  // (allreduce), the reductions of M shards (reduce-scatter), a copy per
  // rank's block into place (allgather), and its node rings' per piece,
  // unless NCCL runs the node phase (one call per phase and slice).
  const double step = shape.stepUs;
  const double nodeStep = shape.nodePhaseInNccl ? 0 : step;
  const double ncclCalls = shape.nodePhaseInNccl ? step : 0;
  // The reducing steps of `rings` node rings, one after another, over
  // `bytes` in all: D - 1 each, a link latency each, each ring's chunk cut
  // in pieces whose transfers and calls overlap.
  auto nodeRingReducingUs = [&](double rings, double bytes) {
    const double pieces = piecesOf(bytes / rings / D, p);
    return (D - 1) * (std::max(rings * in.alphaUs + bytes / D / (in.gbPerSec * 1e3), rings * (pieces - 1) * nodeStep) +
                      rings * nodeStep);
  };
  // Rounds of a rail exchange (RailExchange): each waits for its latency.
  const double railRounds = std::ceil(std::max(0.0, M - 1) / std::max(1, p.railPeersInFlight));
  const double extraRounds = std::max(0.0, railRounds - 1) * out.alphaUs;
  // Compressed: every byte crosses encoded (flat), or the node phase moves
  // full precision and only the rails carry encoded bytes (two-phase).
  // Flat's pieces to other nodes share their node's NICs: D ranks each
  // send (n - D) / n of their encoded input across R of them.
  const double flatShare = shape.nodes > 1 ? D / R * (n - D) / n : (n - 1) / n;
  const double compressedFlatPass = (n - 1) * flat.alphaUs + flatShare * r * S / (flat.gbPerSec * 1e3);
  switch (kind) {
    case CollectiveKind::AllReduce:
      switch (algorithm) {
        case Algorithm::Ring:
          return (n - 1) * (reducingStepUs(flat, S / n, p, step) + segmentedUs(flat, S / n, p));
        case Algorithm::Rabenseifner:
          return 2 * logN * flat.alphaUs + 2 * (n - 1) / n * flat.costUs(S) - 2 * (n - 1) / n * flat.alphaUs + logN * step;
        case Algorithm::RecursiveDoubling: return logN * (flat.costUs(S) + step);
        case Algorithm::TwoPhase:
          // Intra reduce-scatter + allgather of D blocks; exchange and diffuse of (M-1)/M of the buffer per
          // node, over its R NICs; every slice pays its steps' latencies.
          return overlappedUs(nodeRingReducingUs(arSlices, S) +
                                  (D - 1) * (arSlices * in.alphaUs + S / D / (in.gbPerSec * 1e3)) +
                                  2 * arSlices * ncclCalls,
                              2 * (arSlices * std::max(1.0, railRounds) * out.alphaUs + (M - 1) / M * S / R / (out.gbPerSec * 1e3)),
                              arSlices) +
                 arSlices * (M - 1) * step;
        case Algorithm::Leaders: return 2 * logD * in.costUs(S) + logM * out.costUs(S) + (logD + logM) * step;
        case Algorithm::CompressedFlat: return 2 * compressedFlatPass;
        case Algorithm::CompressedTwoPhase:
          return 2 * ((D - 1) * in.costUs(S / n * M) + out.costUs(r * (M - 1) / M * S / R) + extraRounds);
        default: return -1;
      }
    case CollectiveKind::Broadcast:
    case CollectiveKind::Reduce:
      switch (algorithm) {
        case Algorithm::Binomial: return logN * flat.costUs(S);
        // Plus one intra-node hop when the root is not its node's leader.
        case Algorithm::Leaders: return (logD + 1) * in.costUs(S) + logM * out.costUs(S);
        default: return -1;
      }
    case CollectiveKind::ReduceScatter:  // bytes: the whole input
      switch (algorithm) {
        case Algorithm::Ring: return (n - 1) * reducingStepUs(flat, S / n, p, step);
        case Algorithm::TwoPhase:
          // M strided node rings per slice, one after another, then a
          // reduction per received shard.
          return nodeRingReducingUs(rsSlices * M, S) + rsSlices * ncclCalls + out.costUs((M - 1) / M * S / R) +
                 extraRounds + rsSlices * M * step;
        case Algorithm::CompressedFlat: return compressedFlatPass;
        case Algorithm::CompressedTwoPhase:
          return (D - 1) * in.costUs(S / D) + out.costUs(r * (M - 1) / M * S / R) + extraRounds;
        default: return -1;
      }
    case CollectiveKind::AllGather:  // bytes: one rank's block
      switch (algorithm) {
        // Both copy their own block first; Bruck then receives into its
        // rotated scratch and puts it in place with two more copies.
        case Algorithm::Ring: return (n - 1) * segmentedUs(flat, S, p) + step;
        case Algorithm::Bruck: return logN * flat.alphaUs + (n - 1) * S / (flat.gbPerSec * 1e3) + 3 * step;
        case Algorithm::TwoPhase:
          return out.costUs((M - 1) * D * S / R) + extraRounds + (D - 1) * in.costUs(M * S) + agSlices * n * step;
        default: return -1;
      }
    default:
      return -1;
  }
}

}  // namespace fairway
