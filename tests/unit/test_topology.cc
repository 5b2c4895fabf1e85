// Topology: hwloc discovery from the XML machines in tests/data, rank groups,
// network device choice and the transport plan with every override and
// fallback.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "topo/hw_topology.h"
#include "topo/net_device.h"
#include "topo/rank_layout.h"
#include "topo/transport_plan.h"

namespace fairway {
namespace {

HwTopology loadFixture(const std::string& name) {
  HwTopology t;
  Status st = HwTopology::load(std::string(FAIRWAY_TEST_DATA_DIR) + "/" + name, "", &t);
  EXPECT_TRUE(st.isOk()) << st.message();
  return t;
}

std::vector<std::string> nicNamesOfGpus(const HwTopology& t) {
  std::vector<std::string> names;
  for (int nic : t.nicOfGpu) names.push_back(nic < 0 ? "-" : t.nics[nic].name);
  return names;
}

TEST(HwTopology, FourNicsTwoGpusPerSwitch) {
  HwTopology t = loadFixture("gpu8_nic4.xml");
  EXPECT_EQ(t.packages, 2);
  EXPECT_EQ(t.numaNodes, 2);
  EXPECT_EQ(t.cores, 16);
  ASSERT_EQ(t.gpus.size(), 8u);
  ASSERT_EQ(t.nics.size(), 4u);
  // Each switch holds GPUs 2s, 2s+1 and NIC mlx5_(3-s): pairing by position would give mlx5_0 to GPU 0.
  EXPECT_EQ(nicNamesOfGpus(t), (std::vector<std::string>{"mlx5_3", "mlx5_3", "mlx5_2", "mlx5_2", "mlx5_1", "mlx5_1",
                                                         "mlx5_0", "mlx5_0"}));
  EXPECT_EQ(t.gpus[0].name, "cuda0");
  EXPECT_EQ(t.gpus[0].busId, "0000:21:00.0");
  for (int g = 0; g < 8; ++g) EXPECT_EQ(t.gpus[g].numaNode, g < 4 ? 0 : 1) << "GPU " << g;
  for (const NetDevice& nic : t.nics) {
    EXPECT_TRUE(nic.rdma) << nic.name;
    EXPECT_EQ(nic.ucxDeviceName(), nic.name + ":1");
  }
  EXPECT_EQ(t.nics[0].numaNode, 0);
  EXPECT_EQ(t.nics[3].numaNode, 1);
}

TEST(HwTopology, RailOptimisedOneNicPerGpu) {
  HwTopology t = loadFixture("gpu8_nic8.xml");
  ASSERT_EQ(t.gpus.size(), 8u);  // found by PCI class alone: no CUDA OS devices in this file
  ASSERT_EQ(t.nics.size(), 8u);
  std::vector<std::string> expected;
  for (int i = 0; i < 8; ++i) expected.push_back("mlx5_" + std::to_string(i));
  EXPECT_EQ(nicNamesOfGpus(t), expected);
  EXPECT_EQ(t.gpus[0].name, "");
  EXPECT_EQ(t.gpus[5].numaNode, 1);
}

TEST(HwTopology, CpuOnlyTwoSockets) {
  HwTopology t = loadFixture("cpu2s_nic1.xml");
  EXPECT_EQ(t.packages, 2);
  EXPECT_EQ(t.numaNodes, 2);
  EXPECT_TRUE(t.gpus.empty());
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(t.nics[0].name, "enp145s0f0");
  EXPECT_FALSE(t.nics[0].rdma);
  EXPECT_EQ(t.nics[0].numaNode, 1);
}

TEST(HwTopology, DumpWritesWhatWasLoadedAndBadFileIsNamed) {
  const std::string dump = testing::TempDir() + "/fairway_topo_dump.xml";
  HwTopology t;
  ASSERT_TRUE(HwTopology::load(std::string(FAIRWAY_TEST_DATA_DIR) + "/gpu8_nic4.xml", dump, &t).isOk());
  HwTopology again;
  ASSERT_TRUE(HwTopology::load(dump, "", &again).isOk());
  EXPECT_EQ(nicNamesOfGpus(again), nicNamesOfGpus(t));
  std::remove(dump.c_str());

  Status st = HwTopology::load("/nonexistent/machine.xml", "", &t);
  EXPECT_EQ(st.code(), fwInvalidArgument);
  EXPECT_NE(st.message().find("FAIRWAY_TOPO_FILE=/nonexistent/machine.xml"), std::string::npos) << st.message();
}

// Files hwloc 2.9 mishandles, found by fuzz_topology: each is an error
// naming the file, never a crash of the process or a leak (the refusal is
// reported from the probe's child, so the ASan build sees none).
TEST(HwTopology, FilesHwlocMishandlesAreErrors) {
  const struct {
    const char* file;
    const char* what;  // follows "FAIRWAY_TOPO_FILE=<path>: " in the message
  } kCases[] = {
      {"numa_node_without_nodeset.xml", "hwloc crashed"},          // NULL dereference in hwloc
      {"unknown_element_in_pu.xml", "hwloc could not load the topology"},  // refused, objects leaked
  };
  for (const auto& c : kCases) {
    HwTopology t;
    const std::string file = std::string(FAIRWAY_TEST_DATA_DIR) + "/" + c.file;
    Status st = HwTopology::load(file, "", &t);
    EXPECT_EQ(st.code(), fwInvalidArgument) << c.file;
    EXPECT_NE(st.message().find("FAIRWAY_TOPO_FILE=" + file + ": " + c.what), std::string::npos) << st.message();
  }
}

// hwloc keeps an OS device type it does not know (10000 here): the NIC is
// still classified by its PCI class, and reading the type is defined
// behaviour (the ASan+UBSan build checks).
TEST(HwTopology, UnknownOsDeviceTypeIsIgnored) {
  HwTopology t;
  const std::string file = std::string(FAIRWAY_TEST_DATA_DIR) + "/osdev_type_out_of_range.xml";
  Status st = HwTopology::load(file, "", &t);
  ASSERT_TRUE(st.isOk()) << st.message();
  ASSERT_EQ(t.gpus.size(), 1u);
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_FALSE(t.nics[0].rdma);  // its OpenFabrics device is the unknown one
  EXPECT_EQ(t.nicOfGpu[0], 0);
}

TEST(HwTopology, DiscoversThisMachine) {
  HwTopology t;
  Status st = HwTopology::load("", "", &t);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_GE(t.cores, 1);
  EXPECT_GE(t.processingUnits, t.cores);
  EXPECT_EQ(t.nicOfGpu.size(), t.gpus.size());
}

std::vector<std::string> nodesOf(const std::vector<int>& nodeOfRank) {
  std::vector<std::string> names;
  for (int n : nodeOfRank) names.push_back("node" + std::to_string(n));
  return names;
}

TEST(RankLayout, EightRanksAsTwoNodesOfFour) {
  RankLayout l(nodesOf({0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(l.nodeCount(), 2);
  EXPECT_TRUE(l.uniform());
  EXPECT_TRUE(l.blocked());
  EXPECT_EQ(l.localRankOf(6), 2);
  EXPECT_EQ(l.localSizeOf(6), 4);
  EXPECT_EQ(l.leaders(), (std::vector<int>{0, 4}));
  EXPECT_EQ(l.railCount(), 4);
  EXPECT_EQ(l.rail(1), (std::vector<int>{1, 5}));
  EXPECT_EQ(l.describe(), "2 nodes x 4 ranks");
}

TEST(RankLayout, EightRanksAsFourNodesOfTwo) {
  RankLayout l(nodesOf({0, 0, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(l.nodeCount(), 4);
  EXPECT_EQ(l.leaders(), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(l.railCount(), 2);
  EXPECT_EQ(l.rail(1), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(l.describe(), "4 nodes x 2 ranks");
}

TEST(RankLayout, InterleavedRanksAreNotContiguous) {
  RankLayout l(nodesOf({0, 1, 0, 1, 0, 1}));
  EXPECT_TRUE(l.uniform());
  EXPECT_FALSE(l.blocked());
  EXPECT_EQ(l.ranksOfNode(1), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(l.localRankOf(5), 2);
  EXPECT_EQ(l.rail(2), (std::vector<int>{4, 5}));
}

TEST(RankLayout, NonUniformNodesHaveShortRails) {
  // Nodes numbered by lowest rank: "b" (ranks 0, 3, 4) is node 0.
  RankLayout l(std::vector<std::string>{"b", "a", "a", "b", "b"});
  EXPECT_FALSE(l.uniform());
  EXPECT_EQ(l.nodeName(0), "b");
  EXPECT_EQ(l.ranksOfNode(0), (std::vector<int>{0, 3, 4}));
  EXPECT_EQ(l.railCount(), 3);
  EXPECT_EQ(l.rail(0), (std::vector<int>{0, 1}));
  EXPECT_EQ(l.rail(2), (std::vector<int>{4}));
  EXPECT_EQ(l.describe(), "2 nodes with 3+2 ranks");
}

TEST(NetDevice, EachRankTakesTheNicNearestItsGpu) {
  HwTopology t = loadFixture("gpu8_nic4.xml");
  // Local rank 1 drives GPU 1 (no CUDA runtime to say otherwise).
  int gpu = gpuIndexForRank(t, "", 1);
  EXPECT_EQ(gpu, 1);
  EXPECT_EQ(chooseNetDevice(t, gpu, 1, {}).ucxDevice, "mlx5_3:1");
  // A CUDA bus id wins over the local rank.
  gpu = gpuIndexForRank(t, "0000:c3:00.0", 1);
  EXPECT_EQ(gpu, 7);
  EXPECT_EQ(chooseNetDevice(t, gpu, 1, {}).ucxDevice, "mlx5_0:1");

  HwTopology rail = loadFixture("gpu8_nic8.xml");
  for (int local = 0; local < 8; ++local) {
    EXPECT_EQ(chooseNetDevice(rail, gpuIndexForRank(rail, "", local), local, {}).ucxDevice,
              "mlx5_" + std::to_string(local) + ":1");
  }
}

TEST(NetDevice, OverridesAndPlainEthernet) {
  HwTopology t = loadFixture("gpu8_nic4.xml");
  NetDeviceChoice c = chooseNetDevice(t, 0, 3, {"mlx5_0:1", "mlx5_1:1"});
  EXPECT_EQ(c.ucxDevice, "mlx5_1:1");
  EXPECT_NE(c.why.find("FAIRWAY_NET_DEVICES"), std::string::npos);

  HwTopology cpu = loadFixture("cpu2s_nic1.xml");
  c = chooseNetDevice(cpu, gpuIndexForRank(cpu, "", 0), 0, {});
  EXPECT_EQ(c.ucxDevice, "");  // a plain interface is left to UCX
  EXPECT_NE(c.why.find("no RDMA NIC"), std::string::npos) << c.why;
}

PlanInputs gpuNode() {
  PlanInputs in;
  in.cudaDevice = Availability::yes();
  in.nccl = Availability::yes();
  return in;
}

bool hasReason(const TransportPlan& plan, const std::string& text, bool fallback) {
  for (const PlanReason& r : plan.reasons) {
    if (r.text.find(text) != std::string::npos && r.fallback == fallback) return true;
  }
  return false;
}

TEST(TransportPlan, GpuNodeUsesNcclInsideAndUcxBetweenNodes) {
  PlanInputs in = gpuNode();
  TransportPlan plan;
  ASSERT_TRUE(TransportPlan::make(in, &plan).isOk());
  EXPECT_EQ(plan.intraDevice, Provider::Nccl);
  EXPECT_FALSE(plan.interDevice.has_value());
  EXPECT_TRUE(plan.reasons.empty());

  in.nodeCount = 2;
  ASSERT_TRUE(TransportPlan::make(in, &plan).isOk());
  EXPECT_EQ(plan.intraDevice, Provider::Nccl);
  EXPECT_EQ(plan.interDevice, Provider::StagedUcx);
  EXPECT_TRUE(hasReason(plan, "device collectives spanning 2 nodes: NCCL reaches only each node's ranks, so "
                              "allreduce, reduce-scatter and allgather run two-phase (nccl inside each node, "
                              "ucx-staged between nodes)", false));

  in.ucxReachesDeviceMemory = true;
  ASSERT_TRUE(TransportPlan::make(in, &plan).isOk());
  EXPECT_EQ(plan.interDevice, Provider::DeviceUcx);
  EXPECT_EQ(plan.deviceOverUcx, Provider::DeviceUcx);

  in.ucxDeviceMemory = "staged";  // FAIRWAY_UCX_DEVICE_MEMORY=staged wins over UCX's reach
  ASSERT_TRUE(TransportPlan::make(in, &plan).isOk());
  EXPECT_EQ(plan.interDevice, Provider::StagedUcx);
  EXPECT_EQ(plan.deviceOverUcx, Provider::StagedUcx);
  EXPECT_TRUE(hasReason(plan, "FAIRWAY_UCX_DEVICE_MEMORY=staged", false));
}

TEST(TransportPlan, DirectDeviceMemoryNeedsAUcxThatReachesIt) {
  PlanInputs in = gpuNode();
  in.ucxDeviceMemory = "direct";
  TransportPlan plan;
  Status st = TransportPlan::make(in, &plan);
  EXPECT_EQ(st.code(), fwInvalidUsage);
  EXPECT_NE(st.message().find("FAIRWAY_UCX_DEVICE_MEMORY=direct cannot be honoured"), std::string::npos)
      << st.message();
  in.ucxReachesDeviceMemory = true;
  EXPECT_TRUE(TransportPlan::make(in, &plan).isOk());
}

TEST(TransportPlan, NoGpuMeansHostBuffersOnly) {
  PlanInputs in;
  in.cudaDevice = Availability::no("libfairway-device-cuda.so could not be loaded");
  in.nccl = Availability::no("no CUDA device");
  TransportPlan plan;
  ASSERT_TRUE(TransportPlan::make(in, &plan).isOk());
  EXPECT_FALSE(plan.intraDevice.has_value());
  EXPECT_TRUE(hasReason(plan, "device buffers: none (libfairway-device-cuda.so", false));
}

TEST(TransportPlan, FallsBackToStagingWhenNcclCannotRun) {
  PlanInputs in = gpuNode();
  in.nccl = Availability::no("libfairway-transport-nccl.so could not be loaded");
  TransportPlan plan;
  ASSERT_TRUE(TransportPlan::make(in, &plan).isOk());
  EXPECT_EQ(plan.intraDevice, Provider::StagedUcx);
  EXPECT_TRUE(hasReason(plan, "intra-node device buffers: ucx-staged (NCCL is not usable: libfairway-transport-nccl",
                        true));

  in = gpuNode();
  in.sharedGpu = "ranks 0 and 1 share GPU 0000:21:00.0 on node a";
  ASSERT_TRUE(TransportPlan::make(in, &plan).isOk());
  EXPECT_EQ(plan.intraDevice, Provider::StagedUcx);
  EXPECT_TRUE(hasReason(plan, "share GPU 0000:21:00.0 on node a (NCCL needs one GPU per rank)", true));
}

// Host buffers inside a node take its shared-memory segment unless UCX is
// forced there, by FAIRWAY_INTRA_TRANSPORT or by FAIRWAY_TRANSPORT alone.
TEST(TransportPlan, HostBuffersInsideANodeUseSharedMemoryUnlessUcxIsForced) {
  PlanInputs in = gpuNode();
  TransportPlan plan;
  ASSERT_TRUE(TransportPlan::make(in, &plan).isOk());
  EXPECT_TRUE(plan.hostSharedMemory);
  EXPECT_NE(plan.describe().find("host buffers: shared memory inside nodes"), std::string::npos) << plan.describe();
  in.forceAll = "ucx";
  ASSERT_TRUE(TransportPlan::make(in, &plan).isOk());
  EXPECT_FALSE(plan.hostSharedMemory);
  EXPECT_EQ(plan.hostIntraReason, "FAIRWAY_TRANSPORT=ucx");
  in.forceIntra = "nccl";  // the intra-node choice wins, and nccl is for device buffers
  ASSERT_TRUE(TransportPlan::make(in, &plan).isOk());
  EXPECT_TRUE(plan.hostSharedMemory);
  in = gpuNode();
  in.forceIntra = "ucx";
  ASSERT_TRUE(TransportPlan::make(in, &plan).isOk());
  EXPECT_FALSE(plan.hostSharedMemory);
  EXPECT_NE(plan.describe().find("ucx at both levels (FAIRWAY_INTRA_TRANSPORT=ucx)"), std::string::npos);
}

TEST(TransportPlan, OverridesAreHonouredOrRefused) {
  PlanInputs in = gpuNode();
  in.forceIntra = "ucx";
  TransportPlan plan;
  ASSERT_TRUE(TransportPlan::make(in, &plan).isOk());
  EXPECT_EQ(plan.intraDevice, Provider::StagedUcx);
  EXPECT_TRUE(hasReason(plan, "(FAIRWAY_INTRA_TRANSPORT=ucx; this UCX has no CUDA memory support", false));

  in = gpuNode();
  in.nodeCount = 3;
  in.forceAll = "nccl";
  ASSERT_TRUE(TransportPlan::make(in, &plan).isOk());
  EXPECT_EQ(plan.interDevice, Provider::Nccl);
  EXPECT_FALSE(hasReason(plan, "two-phase", false));
  EXPECT_TRUE(hasReason(plan, "inter-node host buffers: ucx (FAIRWAY_TRANSPORT=nccl applies to device buffers", false));

  // A specific level's variable wins over FAIRWAY_TRANSPORT.
  in.forceInter = "ucx";
  ASSERT_TRUE(TransportPlan::make(in, &plan).isOk());
  EXPECT_EQ(plan.intraDevice, Provider::Nccl);
  EXPECT_EQ(plan.interDevice, Provider::StagedUcx);

  in = gpuNode();
  in.nccl = Availability::no("libnccl.so.2: cannot open shared object file");
  in.forceIntra = "nccl";
  Status st = TransportPlan::make(in, &plan);
  EXPECT_EQ(st.code(), fwInvalidUsage);
  EXPECT_EQ(st.message(), "FAIRWAY_INTRA_TRANSPORT=nccl cannot be honoured for the intra-node level: "
                          "libnccl.so.2: cannot open shared object file");

  in = PlanInputs();
  in.cudaDevice = Availability::no("no CUDA device visible");
  in.forceAll = "nccl";
  st = TransportPlan::make(in, &plan);
  EXPECT_EQ(st.code(), fwInvalidUsage);
  EXPECT_NE(st.message().find("FAIRWAY_TRANSPORT=nccl cannot be honoured for the intra-node level: no CUDA device"),
            std::string::npos) << st.message();
}

}  // namespace
}  // namespace fairway
