// Adding an algorithm takes one file: this one. It defines an allreduce
// ("ordered_sum": every rank sends its buffer to rank 0, which sums them
// in rank order and sends the result back), registers its row, and shows
// the row reaching everything the built-in rows reach: FAIRWAY_ALGO and
// its ranges, selection and its INFO log, the cost model, the flight
// record, forked ranks running it through real communicators, and
// fairway-sim. Nothing else in the library names it.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "core/config.h"
#include "core/config_parse.h"
#include "selection/selector.h"
#include "tests/multirank/rank_harness.h"
#ifdef FAIRWAY_TEST_HAS_SIM
#include "sim/simulation.h"
#endif

namespace fairway {
namespace {

// ---- The algorithm: its code and its row ----------------------------------

Status runOrderedSum(CollectiveContext& ctx, const CollectiveArgs& a) {
  const int n = ctx.size();
  const size_t count = a.count;
  Pending* pending = ctx.pendings(static_cast<size_t>(n));
  if (ctx.rank() != 0) {
    FW_RETURN_IF_ERROR(ctx.send(0, a.send, count, /*step=*/1, &pending[0]));
    FW_RETURN_IF_ERROR(ctx.recv(0, a.recv, count, /*step=*/2, &pending[1]));
    return ctx.waitAll(pending, 2);
  }
  const Reducer& reducer = ctx.reducer();
  FW_RETURN_IF_ERROR(ctx.copy(a.recv, a.send, count));
  char* incoming = ctx.scratchBytes(count * ctx.elementSize());
  for (int q = 1; q < n; ++q) {  // in rank order: the same bits on every run
    FW_RETURN_IF_ERROR(ctx.recv(q, incoming, count, 1, &pending[0]));
    FW_RETURN_IF_ERROR(ctx.wait(&pending[0]));
    FW_RETURN_IF_ERROR(ctx.combine(reducer, a.recv, a.recv, incoming, count));
  }
  FW_RETURN_IF_ERROR(ctx.finalize(reducer, a.recv, count));
  for (int q = 1; q < n; ++q) FW_RETURN_IF_ERROR(ctx.send(q, a.recv, count, 2, &pending[q]));
  return ctx.waitAll(pending + 1, static_cast<size_t>(n - 1));
}

// Rank 0 receives n - 1 buffers one after another, then sends n - 1.
double orderedSumCostUs(CollectiveKind, const CostTerms& t) { return 2 * (t.n - 1) * t.flat.costUs(t.S); }

const AlgorithmRow kOrderedSumRow = {"ordered_sum", bitOf(CollectiveKind::AllReduce), runOrderedSum,
                                     orderedSumCostUs};

// Registered once per process, before any communicator or selector.
Algorithm orderedSum() {
  static const Algorithm id = [] {
    Algorithm registered{};
    const Status st = registerAlgorithm(kOrderedSumRow, &registered);
    EXPECT_TRUE(st.isOk()) << st.message();
    return registered;
  }();
  return id;
}

// ---- What the library does with the row -----------------------------------

TEST(RegisteredAlgorithm, IsARowLikeTheBuiltInOnes) {
  const Algorithm id = orderedSum();
  EXPECT_GE(static_cast<int>(id), kBuiltinAlgorithms);
  EXPECT_STREQ(algorithmName(id), "ordered_sum");
  ASSERT_TRUE(algorithmNamed("ordered_sum").has_value());
  EXPECT_EQ(*algorithmNamed("ordered_sum"), id);
  bool listed = false;
  for (Algorithm a : algorithmsOf(CollectiveKind::AllReduce)) listed = listed || a == id;
  EXPECT_TRUE(listed) << "allreduce's algorithms leave it out";
  for (Algorithm a : algorithmsOf(CollectiveKind::Broadcast)) EXPECT_NE(a, id);
  ClusterShape shape;
  shape.ranks = 4;
  EXPECT_DOUBLE_EQ(predictMicros(CollectiveKind::AllReduce, id, 1000, shape),
                   2 * 3 * shape.intra.costUs(1000));
  EXPECT_LT(predictMicros(CollectiveKind::Broadcast, id, 1000, shape), 0) << "a collective it does not run";
}

TEST(RegisteredAlgorithm, BadRowsAreRefusedByName) {
  orderedSum();
  Algorithm id{};
  AlgorithmRow row = kOrderedSumRow;
  Status st = registerAlgorithm(row, &id);
  EXPECT_EQ(st.code(), fwInvalidArgument);
  EXPECT_NE(st.message().find("'ordered_sum' cannot be registered: the name is taken"), std::string::npos)
      << st.message();
  row.name = "ring";
  EXPECT_NE(registerAlgorithm(row, &id).message().find("the name is taken"), std::string::npos);
  row.name = "";
  EXPECT_NE(registerAlgorithm(row, &id).message().find("it has no name"), std::string::npos);
  row.name = "no_collectives";
  row.collectives = 0;
  EXPECT_NE(registerAlgorithm(row, &id).message().find("its collectives"), std::string::npos);
  row = kOrderedSumRow;
  row.name = "no_run";
  row.run = nullptr;
  EXPECT_NE(registerAlgorithm(row, &id).message().find("no run function"), std::string::npos);
  row = kOrderedSumRow;
  row.name = "own";
  row.placement = Placement::ProviderOwn;
  EXPECT_EQ(registerAlgorithm(row, &id).code(), fwInvalidArgument);
  EXPECT_FALSE(algorithmNamed("no_run").has_value()) << "a refused row stays out";
}

Selector selectorFor(const char* algo) {
  std::vector<AlgoOverride> items;
  EXPECT_TRUE(parseAlgoOverrides(algo, &items).isOk());
  Selector s;
  const Status st = Selector::create(items, &s);
  EXPECT_TRUE(st.isOk()) << st.message();
  return s;
}

SelectionKey allreduceKey(size_t bytes, const RankLayout& layout) {
  SelectionKey key;
  key.kind = CollectiveKind::AllReduce;
  key.bytes = bytes;
  key.layout = &layout;
  key.ranks = layout.size();
  return key;
}

TEST(RegisteredAlgorithm, FairwayAlgoChoosesItInItsRanges) {
  const Algorithm id = orderedSum();
  const RankLayout four({"a", "a", "a", "a"});
  const RankLayout eight({"a", "a", "a", "a", "a", "a", "a", "a"});
  Selector s = selectorFor("allreduce:0-64K:ranks=2-4:ordered_sum");
  const Selection chosen = s.select(allreduceKey(4096, four));
  EXPECT_EQ(chosen.algorithm, id);
  EXPECT_STREQ(chosen.rule, "FAIRWAY_ALGO");
  EXPECT_EQ(chosen.node, Provider::HostUcx) << "a point-to-point row";
  EXPECT_NE(s.select(allreduceKey(64 * 1024, four)).algorithm, id);
  EXPECT_NE(s.select(allreduceKey(4096, eight)).algorithm, id);
  EXPECT_GT(s.predict(allreduceKey(4096, four), id), 0);
  // Not for a collective its row does not run; the message lists it where it does.
  std::vector<AlgoOverride> items;
  ASSERT_TRUE(parseAlgoOverrides("broadcast:ordered_sum", &items).isOk());
  const Status st = Selector::create(items, &s);
  EXPECT_EQ(st.code(), fwInvalidArgument);
  EXPECT_NE(st.message().find("cannot run broadcast"), std::string::npos) << st.message();
  ASSERT_TRUE(parseAlgoOverrides("allreduce:nonesuch", &items).isOk());
  EXPECT_NE(Selector::create(items, &s).message().find("ordered_sum"), std::string::npos)
      << "the choices FAIRWAY_ALGO lists include it";
}

TEST(RegisteredAlgorithm, TheCostModelWeighsIt) {
  const Algorithm id = orderedSum();
  // Two nodes of two: the model's row decides among allreduce's algorithms.
  const RankLayout twoByTwo({"a", "a", "b", "b"});
  Selector s;
  EXPECT_GT(s.predict(allreduceKey(8, twoByTwo), id), 0);
  EXPECT_LT(s.predict(allreduceKey(8, twoByTwo), id), s.predict(allreduceKey(1 << 20, twoByTwo), id));
}

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The log's settings are read once per process, at its first line: set
// here, before any test, this process and the ranks it forks (which write
// to the file it opened) log their choices to kLogFile, each line naming
// its writer's pid.
const std::string kLogFile = [] {
  const std::string path = "/tmp/fairway_registry_tests." + std::to_string(getpid()) + ".log";
  setenv("FAIRWAY_DEBUG", "INFO", 1);
  setenv("FAIRWAY_DEBUG_SUBSYS", "ALGO", 1);
  setenv("FAIRWAY_DEBUG_FILE", path.c_str(), 1);
  return path;
}();

// Forked ranks, each with its own communicator built by this binary's
// copy of the library (it links the core statically: the row registered
// here is in the registry the communicators read).
TEST(RegisteredAlgorithm, RanksRunItThroughTheirCommunicators) {
  orderedSum();  // before the fork: every rank inherits the row
  char dirTemplate[] = "/tmp/fairway_registry_XXXXXX";
  ASSERT_NE(mkdtemp(dirTemplate), nullptr);
  const std::string dir = dirTemplate;  // the flight records
  setenv("FAIRWAY_ALGO", "allreduce:0-1M:ordered_sum", 1);
  const size_t ranksBefore = testing::forkedRankPids().size();
  constexpr int kRanks = 4;
  const std::vector<testing::RankOutcome> outcomes = testing::runRanks(kRanks, [&](const testing::RankContext& ctx) {
    int failures = 0;
    fwComm_t comm = nullptr;
    if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) return 1;
    // Inside the range (one and 1,000 floats, in place too) and past it
    // (300,000 floats: 1.2 MB), where the default rows decide.
    for (size_t count : {size_t{1}, size_t{1000}, size_t{300000}}) {
      for (bool inPlace : {false, true}) {
        std::vector<float> in(count), out(count, -1.0f);
        for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(ctx.rank + 1) + static_cast<float>(i % 7);
        float* recv = inPlace ? in.data() : out.data();
        RANK_CHECK(ctx, fwAllReduce(in.data(), recv, count, fwFloat32, fwSum, comm, nullptr) == fwSuccess,
                   "allreduce of " + std::to_string(count));
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i) {
          const float expected = kRanks * (kRanks + 1) / 2.0f + kRanks * static_cast<float>(i % 7);
          wrong += recv[i] != expected ? 1 : 0;
        }
        RANK_CHECK(ctx, wrong == 0, std::to_string(wrong) + " wrong sums of " + std::to_string(count));
      }
    }
    RANK_CHECK(ctx, fwCommDumpTrace(comm, dir.c_str()) == fwSuccess, "fwCommDumpTrace");
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    return failures;
  });
  unsetenv("FAIRWAY_ALGO");
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
  // The ranks' lines of the log and their flight records.
  const std::string everyLog = readFile(kLogFile);
  std::string log, dumps;
  const std::vector<int>& pids = testing::forkedRankPids();
  for (size_t i = ranksBefore; i < pids.size(); ++i) {
    std::istringstream lines(everyLog);
    for (std::string line; std::getline(lines, line);) {
      if (line.find(":" + std::to_string(pids[i]) + " [FAIRWAY") != std::string::npos) log += line + "\n";
    }
    dumps += readFile(dir + "/pid" + std::to_string(pids[i]) + ".fairway_rank" + std::to_string(i - ranksBefore));
  }
  const std::string where = " in host memory on 1 node x 4 ranks: ";
  EXPECT_NE(log.find("allreduce of 4000 bytes" + where + "ordered_sum over ucx (FAIRWAY_ALGO)"), std::string::npos)
      << "the INFO log names the choice and its row:\n" << log;
  EXPECT_NE(log.find("allreduce of 1200000 bytes" + where), std::string::npos) << log;
  EXPECT_EQ(log.find("allreduce of 1200000 bytes" + where + "ordered_sum"), std::string::npos)
      << "past its range the default rows decide:\n" << log;
  EXPECT_NE(dumps.find("ordered_sum"), std::string::npos) << "the flight record names it";
  if (!HasFailure()) std::filesystem::remove_all(dir);
}

// The log goes with the process that made it.
struct RemoveLog : ::testing::Environment {
  void TearDown() override { std::remove(kLogFile.c_str()); }
};
const auto* const kRemoveLog = ::testing::AddGlobalTestEnvironment(new RemoveLog);

#ifdef FAIRWAY_TEST_HAS_SIM
TEST(RegisteredAlgorithm, FairwaySimRunsItAndItsModel) {
  const Algorithm id = orderedSum();
  sim::Scenario s;
  s.spec.ranksPerNode = 4;
  s.nodes = 4;
  s.kind = CollectiveKind::AllReduce;
  const size_t count = sim::countForSize(s, 64 * 1024);
  bool applicable = false;
  for (Algorithm a : sim::applicableAlgorithms(s, count)) applicable = applicable || a == id;
  EXPECT_TRUE(applicable);
  sim::Outcome out;
  const Status st = sim::simulate(s, count, id, &out);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_GT(out.timeUs, 0);
  // Rank 0 receives from 15 ranks and sends to 15.
  EXPECT_EQ(out.stats.messages, 30u);
  bool modelled = false;
  for (const auto& [a, us] : sim::modelPredictions(s, count)) modelled = modelled || (a == id && us > 0);
  EXPECT_TRUE(modelled) << "the simulator's model table leaves it out";
}
#endif

}  // namespace
}  // namespace fairway
