// Whole simulated calls: the library's ring and two-phase code on 64
// simulated ranks against their closed-form times, and the spec files.
#include <gtest/gtest.h>

#include "sim/simulation.h"

namespace fairway::sim {
namespace {

// Links and costs chosen so the closed forms are exact: work on the data
// is free, every message above 8 KiB is a rendezvous.
ClusterSpec testSpec(int ranksPerNode) {
  ClusterSpec spec;
  spec.ranksPerNode = ranksPerNode;
  spec.intraGBs = 100;
  spec.intraLatencyUs = 1;
  spec.nicsPerNode = 1;
  spec.nicGBs = 10;
  spec.nicLatencyUs = 2;
  spec.fabric = ClusterSpec::Fabric::FatTree;
  spec.nodesPerLeaf = 64;
  spec.switchLatencyUs = 0.5;
  spec.messageOverheadUs = 1;
  spec.eagerBytes = 8192;
  spec.copyGBs = spec.reduceGBs = spec.codecGBs = 1e9;
  spec.kernelLaunchUs = 0;
  return spec;
}

// A rendezvous of `bytes` over a path of latency L and rate B (bytes/us):
// the receiver hears of the send (L), the data flows, then arrives (L) and
// is handed over (the message overhead).
double hop(double bytes, double latency, double rate, double overhead) {
  return 2 * latency + bytes / rate + overhead;
}

TEST(Simulation, RingAllreduceTakesItsClosedFormTime) {
  Scenario s;
  s.spec = testSpec(1);
  s.nodes = 64;
  s.kind = CollectiveKind::AllReduce;
  const size_t bytes = 4 << 20;  // 64 KiB chunks: one segment per step
  const size_t count = countForSize(s, bytes);
  Outcome out;
  ASSERT_TRUE(simulate(s, count, Algorithm::Ring, &out).isOk());
  // 2(n-1) steps, each one chunk across one NIC-to-NIC path.
  const double expected = 2 * 63 * hop(bytes / 64.0, 2.0 + 0.5, 10e3, 1.0);
  EXPECT_NEAR(out.timeUs, expected, expected * 1e-3) << "ring on 64 x 1";
}

TEST(Simulation, TwoPhaseAllreduceTakesItsClosedFormTime) {
  Scenario s;
  s.spec = testSpec(8);
  s.nodes = 8;
  s.kind = CollectiveKind::AllReduce;
  const size_t bytes = 2 << 20;  // one slice; 256 KiB blocks; 32 KiB shards
  const size_t count = countForSize(s, bytes);
  Outcome out;
  ASSERT_TRUE(simulate(s, count, Algorithm::TwoPhase, &out).isOk());
  const double D = 8, M = 8;
  // Node ring reduce-scatter and allgather: D-1 steps each of one block.
  const double node = 2 * (D - 1) * hop(bytes / D, 1.0, 100e3, 1.0);
  // Exchange and diffuse: the node's one NIC carries D x (M-1) shards of
  // S/(D M) each way, all at once.
  const double rail = 2 * hop(D * (M - 1) * bytes / (D * M), 2.0 + 0.5, 10e3, 1.0);
  EXPECT_NEAR(out.timeUs, node + rail, (node + rail) * 1e-3) << "two-phase on 8 x 8";
}

TEST(Simulation, TwoPhaseRailRoundsEachTakeTheirOwnHop) {
  Scenario s;
  s.spec = testSpec(8);
  s.nodes = 8;
  s.kind = CollectiveKind::AllReduce;
  s.pipeline.railPeersInFlight = 2;  // 7 peers: rounds of 2, 2, 2 and 1
  const size_t bytes = 2 << 20;
  const size_t count = countForSize(s, bytes);
  Outcome out;
  ASSERT_TRUE(simulate(s, count, Algorithm::TwoPhase, &out).isOk());
  const double D = 8, M = 8;
  const double node = 2 * (D - 1) * hop(bytes / D, 1.0, 100e3, 1.0);
  // Each round of k peers: the NIC carries D x k shards each way at once,
  // and the next round starts when they are all in.
  double rail = 0;
  for (int k : {2, 2, 2, 1}) rail += 2 * hop(D * k * bytes / (D * M), 2.0 + 0.5, 10e3, 1.0);
  EXPECT_NEAR(out.timeUs, node + rail, (node + rail) * 1e-3) << "two-phase on 8 x 8, 2 rail peers at once";
}

TEST(Simulation, EveryRankFinishesAndTheSelectorsPickIsOneThatApplies) {
  Scenario s;
  s.spec = testSpec(8);
  s.nodes = 8;
  for (CollectiveKind kind : {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter, CollectiveKind::AllGather,
                              CollectiveKind::Broadcast, CollectiveKind::Reduce, CollectiveKind::AllToAll}) {
    s.kind = kind;
    const size_t count = countForSize(s, 1 << 20);
    const std::vector<Algorithm> algorithms = applicableAlgorithms(s, count);
    ASSERT_FALSE(algorithms.empty()) << collectiveName(kind);
    const Algorithm pick = selectorChoice(s, count).algorithm;
    EXPECT_NE(std::find(algorithms.begin(), algorithms.end(), pick), algorithms.end()) << collectiveName(kind);
    for (Algorithm a : algorithms) {
      Outcome out;
      const Status st = simulate(s, count, a, &out);
      ASSERT_TRUE(st.isOk()) << collectiveName(kind) << " " << algorithmName(a) << ": " << st.message();
      EXPECT_GT(out.timeUs, 0) << collectiveName(kind) << " " << algorithmName(a);
      EXPECT_GT(out.stats.messages, 0u) << collectiveName(kind) << " " << algorithmName(a);
    }
  }
}

double predictionOf(const Scenario& s, size_t count, Algorithm algorithm) {
  for (const auto& [a, us] : modelPredictions(s, count)) {
    if (a == algorithm) return us;
  }
  ADD_FAILURE() << algorithmName(algorithm) << " does not apply";
  return -1;
}

// On device buffers each copy or reduction is a kernel launch; the
// selector's model and the simulated schedule must agree on where those
// set the pace, or the selector's picks drift from the simulator's.
TEST(Simulation, TheModelFollowsLaunchPacedSchedulesOnDevices) {
  Scenario s;
  ASSERT_TRUE(clusterPreset("h100-ndr400", &s.spec).isOk());
  s.nodes = 1;
  // A ring reduce-scatter of 64 MiB on NVLink: 224 piece reductions of
  // 4 us each, where the link alone would take about 160 us.
  s.kind = CollectiveKind::ReduceScatter;
  size_t count = countForSize(s, 64 << 20);
  Outcome ring;
  ASSERT_TRUE(simulate(s, count, Algorithm::Ring, &ring).isOk());
  EXPECT_GT(ring.timeUs, 7 * 32 * s.spec.kernelLaunchUs);
  EXPECT_NEAR(predictionOf(s, count, Algorithm::Ring) / ring.timeUs, 1.0, 0.15);
  // Bruck's allgather on 64 GPUs: three copies, not one per block.
  s.nodes = 8;
  s.kind = CollectiveKind::AllGather;
  count = countForSize(s, 1 << 20);
  Outcome bruck;
  ASSERT_TRUE(simulate(s, count, Algorithm::Bruck, &bruck).isOk());
  EXPECT_LT(bruck.timeUs, 64 * s.spec.kernelLaunchUs);
  EXPECT_NEAR(predictionOf(s, count, Algorithm::Bruck) / bruck.timeUs, 1.0, 0.3);
  EXPECT_EQ(selectorChoice(s, count).algorithm, Algorithm::Bruck);
}

TEST(Simulation, CompressionCutsTheRailsBytes) {
  Scenario s;
  s.spec = testSpec(8);
  s.nodes = 8;
  s.kind = CollectiveKind::AllReduce;
  const size_t count = countForSize(s, 64 << 20);
  Outcome plain, compressed;
  ASSERT_TRUE(simulate(s, count, Algorithm::TwoPhase, &plain).isOk());
  s.compression.kind = fwCompressInt8;
  ASSERT_TRUE(simulate(s, count, Algorithm::CompressedTwoPhase, &compressed).isOk());
  // int8 with its scales is about a quarter of float32 on the rails, which dominate here.
  EXPECT_LT(compressed.timeUs, 0.5 * plain.timeUs);
}

TEST(Simulation, TheTraceListsEveryMessage) {
  Scenario s;
  s.spec = testSpec(2);
  s.nodes = 2;
  s.kind = CollectiveKind::AllReduce;
  Outcome out;
  std::vector<TraceRecord> trace;
  ASSERT_TRUE(simulate(s, countForSize(s, 1 << 20), Algorithm::Ring, &out, &trace).isOk());
  EXPECT_EQ(trace.size(), out.stats.messages);
  for (const TraceRecord& t : trace) {
    EXPECT_LE(t.flowStart, t.flowEnd);
    EXPECT_LE(t.flowEnd, t.delivered);
    EXPECT_LE(t.delivered, out.timeUs);
    EXPECT_FALSE(t.path.empty());
  }
}

TEST(Engine, ASendLargerThanItsReceiveFailsTheRun) {
  Engine engine(testSpec(2), 1);
  RunStats stats;
  const Status st = engine.run(
      [](int rank, MessagePort& port, DataSpace&) -> Status {
        Pending p;
        FW_RETURN_IF_ERROR(rank == 0 ? port.send(1, nullptr, 4096, 7, &p) : port.recv(0, nullptr, 1024, 7, &p));
        return port.waitAll(&p, 1);
      },
      &stats);
  EXPECT_EQ(st.code(), fwInternalError);
  EXPECT_NE(st.message().find("sent 4096 bytes to rank 1, whose receive has room for 1024"), std::string::npos)
      << st.message();
  // One run per engine: a second is refused, not run on stale clocks.
  EXPECT_EQ(engine.run([](int, MessagePort&, DataSpace&) { return Status::ok(); }, &stats).code(), fwInvalidUsage);
}

TEST(ClusterSpec, PresetsParseAndFilesNameTheirMistakes) {
  for (const std::string& name : presetNames()) {
    ClusterSpec spec;
    EXPECT_TRUE(clusterPreset(name, &spec).isOk()) << name;
  }
  ClusterSpec spec;
  Status st = parseClusterSpec("nic_gbs = fast\n", "x.conf", &spec);
  EXPECT_EQ(st.code(), fwInvalidArgument);
  EXPECT_NE(st.message().find("x.conf:1: nic_gbs = fast"), std::string::npos) << st.message();
  st = parseClusterSpec("# ok\nranks_per_node = 4\nlinks = 3\n", "y.conf", &spec);
  EXPECT_NE(st.message().find("y.conf:3: unknown key 'links'"), std::string::npos) << st.message();
  st = parseClusterSpec("fabric = torus\n", "z.conf", &spec);
  EXPECT_NE(st.message().find("rail-optimized or fat-tree"), std::string::npos) << st.message();
  EXPECT_FALSE(clusterPreset("dgx-9000", &spec).isOk());
  ASSERT_TRUE(parseClusterSpec("ranks_per_node = 4\nnic_gbs = 25\n", "ok.conf", &spec).isOk());
  EXPECT_EQ(spec.ranksPerNode, 4);
  EXPECT_DOUBLE_EQ(spec.nicGBs, 25);
}

}  // namespace
}  // namespace fairway::sim
