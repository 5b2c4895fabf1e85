// The selection table: one answer per (collective, memory, layout, size),
// with the algorithm and the provider of each phase.
#include <gtest/gtest.h>

#include "algorithms/registry.h"
#include "core/config_parse.h"
#include "selection/plan_binding.h"
#include "selection/selector.h"

namespace fairway {
namespace {

RankLayout nodesOf(std::vector<int> ranksPerNode) {
  std::vector<std::string> nodeOfRank;
  for (size_t node = 0; node < ranksPerNode.size(); ++node) {
    for (int i = 0; i < ranksPerNode[node]; ++i) nodeOfRank.push_back("node" + std::to_string(node));
  }
  return RankLayout(nodeOfRank);
}

SelectionKey keyFor(CollectiveKind kind, size_t bytes, const RankLayout* layout, bool onDevice = false,
                    bool ncclRunsIt = true) {
  SelectionKey key;
  key.kind = kind;
  key.bytes = bytes;
  key.layout = layout;
  key.ranks = layout != nullptr ? layout->size() : 4;
  key.onDevice = onDevice;
  key.ncclRunsIt = ncclRunsIt;
  return key;
}

// algo: FAIRWAY_ALGO's text ("" for none).
std::vector<AlgoOverride> overridesOf(const char* algo) {
  std::vector<AlgoOverride> items;
  if (*algo != '\0') {
    EXPECT_TRUE(parseAlgoOverrides(algo, &items).isOk()) << algo;
  }
  return items;
}

Selector selectorWith(const char* algo, DeviceRoutes routes = {}) {
  Selector s;
  EXPECT_TRUE(Selector::create(overridesOf(algo), &s).isOk());
  s.setDeviceRoutes(routes);
  return s;
}

TEST(Selector, HostCrossoversOnOneNodeAndOverrides) {
  const RankLayout one = nodesOf({4});
  Selector s = selectorWith("");
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 1024, &one)).algorithm, Algorithm::RecursiveDoubling);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 32 * 1024, &one)).algorithm, Algorithm::Ring);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 64 << 20, &one)).algorithm, Algorithm::Ring);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllGather, 512, &one)).algorithm, Algorithm::Bruck);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllGather, 2048, &one)).algorithm, Algorithm::Ring);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::Barrier, 0, &one)).algorithm, Algorithm::Dissemination);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllToAllv, 8, nullptr)).algorithm, Algorithm::Pairwise);
  const Selection ring = s.select(keyFor(CollectiveKind::AllReduce, 1 << 20, &one));
  EXPECT_EQ(ring.node, Provider::HostUcx);
  EXPECT_EQ(ring.rail, Provider::HostUcx);
  EXPECT_GT(s.predict(keyFor(CollectiveKind::AllReduce, 1 << 20, &one), ring.algorithm), 0);  // the model has a formula for it

  s = selectorWith("allreduce:ring");
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 8, &one)).algorithm, Algorithm::Ring);
}

// With its node's segment, a single-node communicator's host collectives
// run on shared memory at every size; groups, all-to-all and forced
// algorithms do not (device buffers: see the test below); across nodes the segment serves the node
// phase of two-phase and leaders, never a flat collective.
TEST(Selector, SharedMemoryServesOneNodeAndTheNodePhase) {
  const RankLayout one = nodesOf({4});
  const RankLayout twoByFour = nodesOf({4, 4});
  Selector s = selectorWith("");
  s.setSharedMemory(true);
  for (CollectiveKind kind : {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter, CollectiveKind::AllGather,
                              CollectiveKind::Broadcast, CollectiveKind::Reduce, CollectiveKind::Barrier,
                              CollectiveKind::AllToAll}) {
    for (size_t bytes : {size_t{0}, size_t{8}, size_t{1} << 20, size_t{64} << 20}) {
      const Selection shm = s.select(keyFor(kind, bytes, &one));
      EXPECT_EQ(shm.algorithm, Algorithm::SharedMemory) << collectiveName(kind) << " " << bytes;
      EXPECT_EQ(shm.node, Provider::HostShm);
      EXPECT_EQ(shm.rail, Provider::HostShm);
    }
  }
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllToAllv, 1024, &one)).algorithm, Algorithm::Pairwise);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 1024, nullptr)).algorithm, Algorithm::RecursiveDoubling);
  const Selection twoPhase = s.select(keyFor(CollectiveKind::AllReduce, 64 << 20, &twoByFour));
  EXPECT_EQ(twoPhase.algorithm, Algorithm::TwoPhase);
  EXPECT_EQ(twoPhase.node, Provider::HostShm);
  EXPECT_EQ(twoPhase.rail, Provider::HostUcx);

  s = selectorWith("allreduce:ring,reducescatter:shm");
  s.setSharedMemory(true);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 8, &one)).algorithm, Algorithm::Ring);
  // Forced where it cannot run (across nodes, or without a segment): the
  // table's next row decides, as if nothing were forced (the cost model
  // across nodes, the crossovers on one node).
  Selector unforced = selectorWith("");
  unforced.setSharedMemory(true);
  const SelectionKey acrossNodes = keyFor(CollectiveKind::ReduceScatter, 1 << 20, &twoByFour);
  EXPECT_EQ(s.select(acrossNodes).algorithm, unforced.select(acrossNodes).algorithm);
  EXPECT_EQ(s.select(acrossNodes).rule, std::string("cost model"));
  s.setSharedMemory(false);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::ReduceScatter, 1 << 20, &one)).algorithm, Algorithm::Ring);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 8, &one)).rule, std::string("FAIRWAY_ALGO"));
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 1 << 20, &one)).node, Provider::HostUcx);
}

// The plan names every phase's provider, and the communicator runs what
// it names: the node's segment carries host buffers only; device buffers
// stay on the device, over UCX on device memory or staged through pinned
// bounce buffers.
TEST(Selector, TheSegmentCarriesHostBuffersOnly) {
  const RankLayout one = nodesOf({4});
  const RankLayout twoByTwo = nodesOf({2, 2});
  DeviceRoutes routes;
  routes.present = true;
  Selector staged = selectorWith("", routes);
  staged.setSharedMemory(true);
  const Selection hostFlat = staged.select(keyFor(CollectiveKind::AllReduce, 1 << 20, &one));
  EXPECT_EQ(hostFlat.algorithm, Algorithm::SharedMemory);
  EXPECT_EQ(hostFlat.node, Provider::HostShm);
  EXPECT_EQ(hostFlat.rail, Provider::HostShm);
  const Selection flat = staged.select(keyFor(CollectiveKind::AllReduce, 1 << 20, &one, true, false));
  EXPECT_NE(flat.algorithm, Algorithm::SharedMemory);
  EXPECT_EQ(flat.node, Provider::StagedUcx);
  EXPECT_EQ(flat.rail, Provider::StagedUcx);
  EXPECT_EQ(staged.select(keyFor(CollectiveKind::AllToAll, 64, &one, true, false)).node, Provider::StagedUcx);
  const Selection twoPhase = staged.select(keyFor(CollectiveKind::AllReduce, 64 << 20, &twoByTwo, true, false));
  EXPECT_EQ(twoPhase.algorithm, Algorithm::TwoPhase);
  EXPECT_EQ(twoPhase.node, Provider::StagedUcx);
  EXPECT_EQ(twoPhase.rail, Provider::StagedUcx);
  // shm forced for staged device buffers: warned about, the next row decides.
  Selector forced = selectorWith("allreduce:shm", routes);
  forced.setSharedMemory(true);
  EXPECT_EQ(forced.select(keyFor(CollectiveKind::AllReduce, 1 << 20, &one, true, false)).node, Provider::StagedUcx);

  routes.ucxDirect = true;
  Selector direct = selectorWith("", routes);
  direct.setSharedMemory(true);
  // Device memory on one node without NCCL: the cost model, not the host's crossovers.
  const Selection onDevice = direct.select(keyFor(CollectiveKind::AllReduce, 1 << 20, &one, true, false));
  EXPECT_STREQ(onDevice.rule, "cost model");
  EXPECT_LE(direct.predict(keyFor(CollectiveKind::AllReduce, 1 << 20, &one, true, false), onDevice.algorithm),
            direct.predict(keyFor(CollectiveKind::AllReduce, 1 << 20, &one, true, false), Algorithm::Ring));
  EXPECT_EQ(onDevice.node, Provider::DeviceUcx);
  EXPECT_EQ(onDevice.rail, Provider::DeviceUcx);
  const Selection acrossNodes = direct.select(keyFor(CollectiveKind::AllReduce, 64 << 20, &twoByTwo, true, false));
  EXPECT_EQ(acrossNodes.node, Provider::DeviceUcx);
  // shm forced for device memory UCX reaches: the next row (the cost model) instead.
  direct = selectorWith("allreduce:shm", routes);
  direct.setSharedMemory(true);
  const Selection refused = direct.select(keyFor(CollectiveKind::AllReduce, 1 << 20, &one, true, false));
  EXPECT_NE(refused.algorithm, Algorithm::SharedMemory);
  EXPECT_STREQ(refused.rule, "cost model");
}

TEST(Selector, AcrossNodesTheCostModelDecidesAndTwoPhaseFallsBackWhereItCannotRun) {
  const RankLayout twoByFour = nodesOf({4, 4});
  Selector s = selectorWith("");
  // Large buffers cross the slow inter-node link once per node with two-phase.
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 64 << 20, &twoByFour)).algorithm, Algorithm::TwoPhase);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::ReduceScatter, 64 << 20, &twoByFour)).algorithm, Algorithm::TwoPhase);

  s = selectorWith("allreduce:twophase");
  const RankLayout uneven = nodesOf({3, 2});
  const RankLayout one = nodesOf({4});
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 1 << 20, &twoByFour)).algorithm, Algorithm::TwoPhase);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 1 << 20, &uneven)).algorithm, Algorithm::Ring);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 1 << 20, &one)).algorithm, Algorithm::Ring);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 64, nullptr)).algorithm, Algorithm::RecursiveDoubling);
}

TEST(Selector, TwoPhasesRailBytesSpreadOverTheNodesNics) {
  // 128 nodes of 8 GPUs, 450 GB/s inside a node, one 50 GB/s NIC measured.
  const RankLayout layout = nodesOf(std::vector<int>(128, 8));
  Selector s = selectorWith("");
  s.setLinks(LinkModel{4.5, 450}, LinkModel{5.3, 50});
  const SelectionKey key = keyFor(CollectiveKind::AllReduce, size_t{1} << 30, &layout);
  const double oneNic = s.predict(key, Algorithm::TwoPhase);
  // One NIC: all 8 ranks' rail bytes through it, slower than Rabenseifner.
  EXPECT_EQ(s.select(key).algorithm, Algorithm::Rabenseifner);
  s.setRails(8);
  const double eightNics = s.predict(key, Algorithm::TwoPhase);
  EXPECT_LT(eightNics, oneNic / 4);
  EXPECT_EQ(s.select(key).algorithm, Algorithm::TwoPhase);
  // A flat algorithm's per-rank messages do not change.
  s.setRails(1);
  const double ringOne = s.predict(key, Algorithm::Ring);
  s.setRails(8);
  EXPECT_DOUBLE_EQ(s.predict(key, Algorithm::Ring), ringOne);
  // A communicator keeps a copy of the selector its creation set up.
  const Selector copied(s);
  EXPECT_EQ(copied.rails(), 8);
  EXPECT_EQ(copied.select(key).algorithm, Algorithm::TwoPhase);
  Selector assigned;
  assigned = s;
  EXPECT_EQ(assigned.rails(), 8);
}

TEST(Selector, DeviceBuffersPayAKernelLaunchPerWaitedStep) {
  // 512 nodes of 8 GPUs, UCX on device memory, no NCCL (fairway-sim's
  // h100-ndr400): two-phase allreduce of 1 MiB is one slice whose stage B
  // reduces 511 received shards, a kernel launch each on a device.
  const RankLayout layout = nodesOf(std::vector<int>(512, 8));
  DeviceRoutes routes;
  routes.present = routes.ucxDirect = true;
  Selector s = selectorWith("", routes);
  s.setLinks(LinkModel{4.5, 450}, LinkModel{5.3, 50});
  s.setRails(8);
  const SelectionKey host = keyFor(CollectiveKind::AllReduce, 1 << 20, &layout);
  const SelectionKey device = keyFor(CollectiveKind::AllReduce, 1 << 20, &layout, true, false);
  // Per slice: stage B's reductions of M - 1 received shards, and the
  // node ring's D - 1 reducing steps of one piece each.
  EXPECT_NEAR(s.predict(device, Algorithm::TwoPhase) - s.predict(host, Algorithm::TwoPhase), (511 + 7) * kDeviceStepUs,
              1e-6);
  EXPECT_EQ(s.select(host).algorithm, Algorithm::TwoPhase);
  EXPECT_EQ(s.select(device).algorithm, Algorithm::Rabenseifner);
  // The flat ring's 4,095 reducing steps, one piece (256 bytes) each.
  EXPECT_NEAR(s.predict(device, Algorithm::Ring) - s.predict(host, Algorithm::Ring), 4095 * kDeviceStepUs, 1e-6);
  // Bruck's copy of its own block and its two-copy rotation; its steps
  // receive in place.
  const SelectionKey hostGather = keyFor(CollectiveKind::AllGather, 1 << 20, &layout);
  const SelectionKey deviceGather = keyFor(CollectiveKind::AllGather, 1 << 20, &layout, true, false);
  EXPECT_NEAR(s.predict(deviceGather, Algorithm::Bruck) - s.predict(hostGather, Algorithm::Bruck), 3 * kDeviceStepUs,
              1e-6);
}

TEST(Selector, AReducingRingOnNvlinkIsPacedByItsLaunches) {
  // One node of 8 GPUs: a ring reduce-scatter of 64 MiB moves 8 MiB a
  // step in 32 pieces of 256 KiB, 0.6 us each at 450 GB/s, but combines
  // each piece with a 4 us launch: the launches set the pace.
  const RankLayout node = nodesOf({8});
  DeviceRoutes routes;
  routes.present = routes.ucxDirect = true;
  Selector s = selectorWith("", routes);
  s.setLinks(LinkModel{4.5, 450}, LinkModel{5.3, 50});
  const SelectionKey device = keyFor(CollectiveKind::ReduceScatter, 64 << 20, &node, true, false);
  const SelectionKey host = keyFor(CollectiveKind::ReduceScatter, 64 << 20, &node);
  EXPECT_NEAR(s.predict(device, Algorithm::Ring), 7 * 32 * kDeviceStepUs, 1e-6);
  // On the host, the pieces' latencies, four in flight, set it.
  EXPECT_NEAR(s.predict(host, Algorithm::Ring), 7 * 32 * (4.5 + (256 << 10) / 450e3) / 4, 1e-6);

  // Two-phase on 2 such nodes: Fairway's node rings pay a launch per
  // piece; where NCCL runs the node phase (as placeProviders places it),
  // one call per phase and slice instead.
  const RankLayout twoNodes = nodesOf({8, 8});
  const SelectionKey ucxNodes = keyFor(CollectiveKind::ReduceScatter, 64 << 20, &twoNodes, true, false);
  const SelectionKey ncclNodes = keyFor(CollectiveKind::ReduceScatter, 64 << 20, &twoNodes, true, true);
  routes.ncclInNodes = true;
  s.setDeviceRoutes(routes);
  // At least the two node rings' 7 reducing steps' launches are saved.
  EXPECT_GT(s.predict(ucxNodes, Algorithm::TwoPhase) - s.predict(ncclNodes, Algorithm::TwoPhase),
            2 * 7 * kDeviceStepUs);
}

TEST(Selector, DeviceBuffersTakeNcclWhereItReachesEveryRank) {
  const RankLayout one = nodesOf({4});
  DeviceRoutes routes;
  routes.present = routes.ncclEverywhere = true;
  Selector s = selectorWith("", routes);
  Selection native = s.select(keyFor(CollectiveKind::AllReduce, 1 << 20, &one, true));
  EXPECT_EQ(native.algorithm, Algorithm::Native);
  EXPECT_EQ(native.node, Provider::Nccl);
  EXPECT_LT(s.predict(keyFor(CollectiveKind::AllReduce, 1 << 20, &one, true), native.algorithm), 0);  // no model of NCCL's own collective
  // NCCL has no form of it (bitwise op, all-to-all): the cost model's choice over staged UCX.
  Selection bitwise = s.select(keyFor(CollectiveKind::AllReduce, 1 << 20, &one, true, false));
  EXPECT_STREQ(bitwise.rule, "cost model");
  EXPECT_EQ(bitwise.rail, Provider::StagedUcx);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllToAll, 64, &one, true, false)).node, Provider::StagedUcx);
  // Host buffers of the same communicator never see NCCL.
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 1 << 20, &one)).node, Provider::HostUcx);

  // A forced algorithm wins over NCCL's own collective, on UCX reaching device memory.
  routes.ucxDirect = true;
  s = selectorWith("allreduce:ring", routes);
  Selection forced = s.select(keyFor(CollectiveKind::AllReduce, 64, &one, true));
  EXPECT_EQ(forced.algorithm, Algorithm::Ring);
  EXPECT_EQ(forced.node, Provider::DeviceUcx);
}

TEST(Selector, DeviceBuffersAcrossNodesRunTwoPhaseWithNcclInsideNodes) {
  const RankLayout twoByTwo = nodesOf({2, 2});
  const RankLayout uneven = nodesOf({3, 2});
  DeviceRoutes routes;
  routes.present = routes.ncclInNodes = true;
  Selector s = selectorWith("", routes);
  for (CollectiveKind kind : {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter, CollectiveKind::AllGather}) {
    for (size_t bytes : {size_t{4}, size_t{1} << 28}) {
      const Selection two = s.select(keyFor(kind, bytes, &twoByTwo, true));
      EXPECT_EQ(two.algorithm, Algorithm::TwoPhase) << collectiveName(kind) << " " << bytes;
      EXPECT_EQ(two.node, Provider::Nccl);
      EXPECT_EQ(two.rail, Provider::StagedUcx);
      EXPECT_GT(s.predict(keyFor(kind, bytes, &twoByTwo, true), two.algorithm), 0);
    }
  }
  // Broadcast has no two-phase form; nodes of different sizes have no two-phase at all.
  EXPECT_EQ(s.select(keyFor(CollectiveKind::Broadcast, 1 << 20, &twoByTwo, true)).node, Provider::StagedUcx);
  const Selection flat = s.select(keyFor(CollectiveKind::AllReduce, 1 << 20, &uneven, true));
  EXPECT_NE(flat.algorithm, Algorithm::TwoPhase);
  EXPECT_EQ(flat.node, Provider::StagedUcx);

  // Another algorithm forced: it runs flat over UCX; two-phase forced keeps NCCL inside nodes.
  routes.ucxDirect = true;
  s = selectorWith("allreduce:ring,allgather:twophase", routes);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 1 << 20, &twoByTwo, true)).node, Provider::DeviceUcx);
  const Selection forcedTwoPhase = s.select(keyFor(CollectiveKind::AllGather, 1 << 20, &twoByTwo, true));
  EXPECT_EQ(forcedTwoPhase.node, Provider::Nccl);
  EXPECT_EQ(forcedTwoPhase.rail, Provider::DeviceUcx);
}

// Every choice names the row that made it; a compressed override applies
// to compressed calls only and a plain one to the rest.
TEST(Selector, EveryChoiceNamesItsRow) {
  const RankLayout one = nodesOf({4});
  const RankLayout twoByTwo = nodesOf({2, 2});
  DeviceRoutes routes;
  routes.present = routes.ncclInNodes = true;
  Selector s = selectorWith("allreduce:compressed_flat,reducescatter:ring", routes);
  s.setSharedMemory(true);
  EXPECT_STREQ(s.select(keyFor(CollectiveKind::AllReduce, 1024, nullptr)).rule, "measured crossover");
  EXPECT_STREQ(s.select(keyFor(CollectiveKind::AllReduce, 1024, &one)).rule, "the node's segment");
  EXPECT_STREQ(s.select(keyFor(CollectiveKind::AllReduce, 64 << 20, &twoByTwo)).rule, "cost model");
  EXPECT_STREQ(s.select(keyFor(CollectiveKind::AllReduce, 1024, &twoByTwo, true)).rule, "NCCL inside nodes");
  EXPECT_STREQ(s.select(keyFor(CollectiveKind::Gather, 1024, &twoByTwo)).rule, "default");
  EXPECT_STREQ(s.select(keyFor(CollectiveKind::ReduceScatter, 1024, &one)).rule, "FAIRWAY_ALGO");
  SelectionKey compressed = keyFor(CollectiveKind::AllReduce, 64 << 20, &twoByTwo);
  compressed.compressed = true;
  compressed.wireRatio = 0.25;
  const Selection forced = s.select(compressed);
  EXPECT_EQ(forced.algorithm, Algorithm::CompressedFlat);
  EXPECT_STREQ(forced.rule, "FAIRWAY_ALGO");
  compressed.kind = CollectiveKind::ReduceScatter;  // a plain override leaves compressed calls to their rows
  EXPECT_TRUE(isCompressedAlgorithm(s.select(compressed).algorithm));
  EXPECT_STRNE(s.select(compressed).rule, "FAIRWAY_ALGO");
}

// The plan carries the pipeline settings the algorithm cuts its buffers by,
// host or device, whichever row chose it.
TEST(Selector, EveryChoiceCarriesThePipelineSettings) {
  const RankLayout twoByTwo = nodesOf({2, 2});
  PipelineSettings pipeline;
  pipeline.segmentBytes = 12345;
  pipeline.sliceBytes = 3 << 20;
  Selector s = selectorWith("allgather:bruck", DeviceRoutes());
  s.setPipeline(pipeline);
  for (const SelectionKey& key : {keyFor(CollectiveKind::AllReduce, 64, &twoByTwo),
                                  keyFor(CollectiveKind::AllReduce, 64 << 20, &twoByTwo),
                                  keyFor(CollectiveKind::AllGather, 1 << 20, &twoByTwo)}) {
    const Selection chosen = s.select(key);
    EXPECT_EQ(chosen.pipeline->segmentBytes, 12345u) << chosen.rule;
    EXPECT_EQ(chosen.pipeline->sliceBytes, size_t{3} << 20) << chosen.rule;
  }
}

// FAIRWAY_ALGO's ranges: sizes [FROM, TO), rank counts inclusive, the
// first item that applies wins, and calls outside every item fall to the
// default rows.
TEST(Selector, OverridesBySizeAndRankCount) {
  const RankLayout four = nodesOf({4}), eight = nodesOf({8});
  Selector s = selectorWith("allreduce:0-64K:ranks=2-4:rabenseifner,allreduce:64K-:ring,allgather:ranks=8-:ring");
  const Selection small = s.select(keyFor(CollectiveKind::AllReduce, 1024, &four));
  EXPECT_EQ(small.algorithm, Algorithm::Rabenseifner);
  EXPECT_STREQ(small.rule, "FAIRWAY_ALGO");
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 64 * 1024 - 1, &four)).algorithm, Algorithm::Rabenseifner);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 64 * 1024, &four)).algorithm, Algorithm::Ring);
  // Eight ranks are outside the first item: the default crossover decides.
  const Selection outside = s.select(keyFor(CollectiveKind::AllReduce, 1024, &eight));
  EXPECT_EQ(outside.algorithm, Algorithm::RecursiveDoubling);
  EXPECT_STREQ(outside.rule, "measured crossover");
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllGather, 512, &eight)).algorithm, Algorithm::Ring);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllGather, 512, &four)).algorithm, Algorithm::Bruck);
  // Written first, applies first.
  s = selectorWith("allreduce:ranks=4:ring,allreduce:rabenseifner");
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 8, &four)).algorithm, Algorithm::Ring);
  EXPECT_EQ(s.select(keyFor(CollectiveKind::AllReduce, 8, &eight)).algorithm, Algorithm::Rabenseifner);
}

// One binding for every caller: a plan takes the providers it names from
// what the caller has, and names what it lacks. The providers are never
// touched here, so stand-ins do.
TEST(PlanBinding, EachPlanTakesTheProvidersItNames) {
  char memory, segment, nccl, pinned, wire;
  PlanProviders has;
  has.buffers = reinterpret_cast<DataSpace*>(&memory);
  has.segment = reinterpret_cast<NodePhase*>(&segment);
  has.ncclNode = reinterpret_cast<NodePhase*>(&nccl);
  has.pinnedRail = reinterpret_cast<DataSpace*>(&pinned);
  has.stagedWire = reinterpret_cast<StagedWire*>(&wire);
  auto plan = [](Algorithm a, Provider node, Provider rail) {
    Selection s;
    s.algorithm = a;
    s.node = node;
    s.rail = rail;
    return s;
  };
  BoundPlan b;
  ASSERT_TRUE(bindPlan(plan(Algorithm::Ring, Provider::HostUcx, Provider::HostUcx), has, &b).isOk());
  EXPECT_EQ(b.space, has.buffers);
  EXPECT_EQ(b.hierarchy.node, nullptr);
  EXPECT_EQ(b.hierarchy.rail, nullptr);
  EXPECT_EQ(b.wire, nullptr);
  ASSERT_TRUE(bindPlan(plan(Algorithm::TwoPhase, Provider::HostShm, Provider::HostUcx), has, &b).isOk());
  EXPECT_EQ(b.hierarchy.node, has.segment);
  EXPECT_EQ(b.wire, nullptr);
  // NCCL inside the node: a staged rail works in pinned memory, no wire.
  ASSERT_TRUE(bindPlan(plan(Algorithm::TwoPhase, Provider::Nccl, Provider::StagedUcx), has, &b).isOk());
  EXPECT_EQ(b.hierarchy.node, has.ncclNode);
  EXPECT_EQ(b.hierarchy.rail, has.pinnedRail);
  EXPECT_EQ(b.wire, nullptr);
  ASSERT_TRUE(bindPlan(plan(Algorithm::TwoPhase, Provider::Nccl, Provider::DeviceUcx), has, &b).isOk());
  EXPECT_EQ(b.hierarchy.rail, nullptr) << "UCX reaches device memory: the rail works on it";
  // Every other staged message goes through the wire.
  ASSERT_TRUE(bindPlan(plan(Algorithm::Ring, Provider::StagedUcx, Provider::StagedUcx), has, &b).isOk());
  EXPECT_EQ(b.wire, has.stagedWire);
  EXPECT_EQ(b.hierarchy.node, nullptr);

  PlanProviders lacks = has;
  lacks.segment = nullptr;
  Status st = bindPlan(plan(Algorithm::SharedMemory, Provider::HostShm, Provider::HostShm), lacks, &b);
  EXPECT_EQ(st.code(), fwInternalError);
  EXPECT_NE(st.message().find("the plan for shm needs the node's segment"), std::string::npos) << st.message();
  lacks = has;
  lacks.stagedWire = nullptr;
  st = bindPlan(plan(Algorithm::Ring, Provider::StagedUcx, Provider::StagedUcx), lacks, &b);
  EXPECT_NE(st.message().find("the staged wire"), std::string::npos) << st.message();
  st = bindPlan(plan(Algorithm::Native, Provider::Nccl, Provider::Nccl), has, &b);
  EXPECT_EQ(st.code(), fwInternalError) << "NCCL's own collective is NCCL's to run";
}

TEST(Selector, RejectsUnknownNames) {
  Selector s;
  Status st = Selector::create(overridesOf("allreduce:bruck"), &s);
  EXPECT_EQ(st.code(), fwInvalidArgument);
  EXPECT_NE(st.message().find("ring|rabenseifner|recursive_doubling"), std::string::npos) << st.message();
  st = Selector::create(overridesOf("allsum:ring"), &s);
  EXPECT_NE(st.message().find("unknown collective 'allsum'"), std::string::npos) << st.message();
  st = Selector::create(overridesOf("allreduce:nccl"), &s);
  EXPECT_EQ(st.code(), fwInvalidArgument) << "NCCL's own collective is not a Fairway algorithm to force";
}

}  // namespace
}  // namespace fairway
