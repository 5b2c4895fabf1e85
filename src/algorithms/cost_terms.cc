#include "algorithms/cost_terms.h"

#include <algorithm>
#include <cmath>

namespace fairway {

CostTerms::CostTerms(size_t bytes, const ClusterShape& s)
    : shape(s),
      bytes(bytes),
      n(s.ranks),
      M(s.nodes),
      D(s.perNode),
      S(static_cast<double>(bytes)),
      logN(std::ceil(std::log2(std::max(1.0, n)))),
      logD(std::ceil(std::log2(std::max(1.0, D)))),
      logM(std::ceil(std::log2(std::max(1.0, M)))),
      // Flat algorithms on several nodes pay the inter-node link at every step.
      flat(s.nodes > 1 ? s.inter : s.intra),
      in(s.intra),
      out(s.inter),
      r(s.wireRatio),
      // Never more NICs than a node has ranks.
      R(std::max(1.0, std::min(static_cast<double>(s.rails), D))),
      // Copy and reduction calls that wait for each other, at stepUs each;
      // none in the node phase where NCCL runs it (one call per phase and slice).
      step(s.stepUs),
      nodeStep(s.nodePhaseInNccl ? 0 : s.stepUs),
      ncclCalls(s.nodePhaseInNccl ? s.stepUs : 0),
      extraRounds(0),
      railRounds(std::ceil(std::max(0.0, M - 1) / std::max(1, s.pipeline.railPeersInFlight))) {
  extraRounds = std::max(0.0, railRounds - 1) * out.alphaUs;
}

// `depth` segments in flight: the link's time for the bytes, or, where the
// latency of each segment outweighs its transfer, the segments' latencies
// spread over the window.
double CostTerms::segmentedUs(const LinkModel& link, double chunk) const {
  const PipelineSettings& p = shape.pipeline;
  const double segment = static_cast<double>(std::max<size_t>(1, p.segmentBytes));
  const double pieces = std::ceil(chunk / segment);
  if (pieces <= 1) return link.costUs(chunk);
  const double window = std::min(pieces, static_cast<double>(std::max(1, p.depth)));
  return std::max(link.costUs(chunk), pieces * link.costUs(segment) / window);
}

double CostTerms::piecesOf(double chunk) const {
  return std::max(1.0, std::ceil(chunk / static_cast<double>(std::max<size_t>(1, shape.pipeline.segmentBytes))));
}

// Every piece received is combined before it is forwarded, one call after
// another on the rank (step each), while later pieces cross the link. The
// slower of the two paces the step, and the last piece's call follows its
// transfer. Where a call costs more than a piece's transfer (a kernel
// launch against NVLink), the calls decide.
double CostTerms::reducingStepUs(const LinkModel& link, double chunk) const {
  return std::max(segmentedUs(link, chunk), (piecesOf(chunk) - 1) * step) + step;
}

// D - 1 steps each, a link latency each, each ring's chunk cut in pieces
// whose transfers and calls overlap.
double CostTerms::nodeRingReducingUs(double rings, double bytes) const {
  const double pieces = piecesOf(bytes / rings / D);
  return (D - 1) *
         (std::max(rings * in.alphaUs + bytes / D / (in.gbPerSec * 1e3), rings * (pieces - 1) * nodeStep) +
          rings * nodeStep);
}

// Every byte crosses encoded. Pieces to other nodes share their node's
// NICs: D ranks each send (n - D) / n of their encoded input across R.
double CostTerms::compressedFlatPassUs() const {
  const double share = shape.nodes > 1 ? D / R * (n - D) / n : (n - 1) / n;
  return (n - 1) * flat.alphaUs + share * r * S / (flat.gbPerSec * 1e3);
}

double overlappedUs(double nodeUs, double railUs, double slices) {
  return std::max(nodeUs, railUs) + std::min(nodeUs, railUs) / std::max(1.0, slices);
}

}  // namespace fairway
