#include "comm/link_probe.h"

#include <algorithm>
#include <chrono>
#include <vector>


namespace fairway {
namespace {

constexpr int kLatencyWarmup = 5;
constexpr int kLatencyRounds = 30;
constexpr size_t kBandwidthBytes = 4 << 20;
constexpr int kBandwidthRounds = 3;  // after one warm-up transfer
// Floor on a measured bandwidth's transfer time, so a link faster than the
// clock resolution still gives a finite bandwidth.
constexpr double kMinTransferUs = 1;

double nowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Status exchange(CollectiveRunner& comm, bool sendFirst, int peer, void* sendBuf, size_t sendBytes, void* recvBuf,
                size_t recvBytes) {
  Pending send, recv;
  if (sendFirst) {
    FW_RETURN_IF_ERROR(comm.pointToPoint().postSend(sendBuf, sendBytes, peer, PointToPoint::kDefaultTag, &send));
    FW_RETURN_IF_ERROR(comm.messenger().wait(&send));
    FW_RETURN_IF_ERROR(comm.pointToPoint().postRecv(recvBuf, recvBytes, peer, PointToPoint::kDefaultTag, &recv));
    return comm.messenger().wait(&recv);
  }
  FW_RETURN_IF_ERROR(comm.pointToPoint().postRecv(recvBuf, recvBytes, peer, PointToPoint::kDefaultTag, &recv));
  FW_RETURN_IF_ERROR(comm.messenger().wait(&recv));
  FW_RETURN_IF_ERROR(comm.pointToPoint().postSend(sendBuf, sendBytes, peer, PointToPoint::kDefaultTag, &send));
  return comm.messenger().wait(&send);
}

// Run by the two ranks of a pair; the one that starts (rank 0) measures.
// Latency: half the mean round trip of an 8-byte ping-pong. Bandwidth:
// kBandwidthBytes one way answered by 8 bytes, less the two latencies.
Status pingPong(CollectiveRunner& comm, int peer, bool starts, std::vector<char>& big, LinkModel* out) {
  char small[8] = {}, reply[8] = {};
  double t0 = 0;
  for (int i = 0; i < kLatencyWarmup + kLatencyRounds; ++i) {
    if (i == kLatencyWarmup) t0 = nowUs();
    FW_RETURN_IF_ERROR(exchange(comm, starts, peer, small, sizeof(small), reply, sizeof(reply)));
  }
  const double alphaUs = (nowUs() - t0) / kLatencyRounds / 2;
  for (int i = 0; i <= kBandwidthRounds; ++i) {
    if (i == 1) t0 = nowUs();
    if (starts) {
      FW_RETURN_IF_ERROR(exchange(comm, true, peer, big.data(), big.size(), reply, sizeof(reply)));
    } else {
      FW_RETURN_IF_ERROR(exchange(comm, false, peer, small, sizeof(small), big.data(), big.size()));
    }
  }
  const double transferUs = std::max(kMinTransferUs, (nowUs() - t0) / kBandwidthRounds - 2 * alphaUs);
  out->alphaUs = alphaUs;
  out->gbPerSec = static_cast<double>(big.size()) / (transferUs * 1e3);
  return Status::ok();
}

}  // namespace

Status measureLinks(CollectiveRunner& comm, MeasuredLinks* out) {
  const RankLayout& layout = comm.layout();
  const int me = comm.rank();
  // Nodes are numbered by lowest rank: rank 0 leads node 0.
  const std::vector<int>& node0 = layout.ranksOfNode(0);
  const int intraPeer = node0.size() > 1 ? node0[1] : -1;
  const int interPeer = layout.nodeCount() > 1 ? layout.ranksOfNode(1)[0] : -1;
  // Rank 0 fills: intra measured?, alpha, GB/s, inter measured?, alpha, GB/s.
  double results[6] = {};
  if (me == 0 || me == intraPeer || me == interPeer) {
    std::vector<char> big(kBandwidthBytes);
    LinkModel link;
    if (intraPeer >= 0 && (me == 0 || me == intraPeer)) {
      FW_RETURN_IF_ERROR(pingPong(comm, me == 0 ? intraPeer : 0, me == 0, big, &link)
                             .withContext("measuring the intra-node link"));
      if (me == 0) results[0] = 1, results[1] = link.alphaUs, results[2] = link.gbPerSec;
    }
    if (interPeer >= 0 && (me == 0 || me == interPeer)) {
      FW_RETURN_IF_ERROR(pingPong(comm, me == 0 ? interPeer : 0, me == 0, big, &link)
                             .withContext("measuring the inter-node link"));
      if (me == 0) results[3] = 1, results[4] = link.alphaUs, results[5] = link.gbPerSec;
    }
  }
  CollectiveArgs bcast;
  bcast.kind = CollectiveKind::Broadcast;
  bcast.datatype = fwFloat64;
  bcast.count = 6;
  bcast.send = results;
  bcast.recv = results;
  bcast.root = 0;
  FW_RETURN_IF_ERROR(comm.collective(bcast).withContext("sharing the measured links"));
  out->intraMeasured = results[0] != 0;
  out->intra = LinkModel{results[1], results[2]};
  out->interMeasured = results[3] != 0;
  out->inter = LinkModel{results[4], results[5]};
  return Status::ok();
}

}  // namespace fairway
