// The node's shared-memory segment on its own: created zeroed and
// reserved, opened by name, refused with the size and the free space when
// /dev/shm cannot hold it, and never left in /dev/shm once unlinked.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "providers/shm/shm_node.h"
#include "providers/shm/shm_round_trip.h"
#include "providers/shm/shm_segment.h"

namespace fairway {
namespace {

bool exists(const std::string& name) {
  struct stat st {};
  return ::stat(("/dev/shm" + name).c_str(), &st) == 0;
}

TEST(ShmSegment, CreateOpenAndUnlink) {
  ShmSegment leader;
  ASSERT_TRUE(ShmSegment::create(1 << 20, &leader).isOk());
  ASSERT_TRUE(leader.mapped());
  EXPECT_EQ(leader.data()[12345], 0);
  EXPECT_EQ(leader.name().rfind(std::string("/") + kShmNamePrefix, 0), 0u) << leader.name();
  EXPECT_TRUE(exists(leader.name()));
  leader.data()[100] = 42;
  ShmSegment follower;
  ASSERT_TRUE(ShmSegment::open(leader.name(), 1 << 20, &follower).isOk());
  EXPECT_EQ(follower.data()[100], 42);
  // A follower that expects more than the leader made is refused.
  ShmSegment greedy;
  const Status st = ShmSegment::open(leader.name(), 2 << 20, &greedy);
  EXPECT_EQ(st.code(), fwInvalidUsage);
  EXPECT_NE(st.message().find("FAIRWAY_SHM_CHUNK_BYTES"), std::string::npos) << st.message();
  leader.unlink();
  EXPECT_FALSE(exists(leader.name()));
  EXPECT_EQ(follower.data()[100], 42);  // the mappings outlive the name
  ShmSegment late;
  EXPECT_EQ(ShmSegment::open(leader.name(), 1 << 20, &late).code(), fwSystemError);
}

TEST(ShmSegment, DestroyingTheCreatorUnlinks) {
  std::string name;
  {
    ShmSegment segment;
    ASSERT_TRUE(ShmSegment::create(4096, &segment).isOk());
    name = segment.name();
  }
  EXPECT_FALSE(exists(name));
}

TEST(ShmSegment, TooLargeNamesTheSizeAndTheFreeSpace) {
  ShmSegment segment;
  const size_t huge = size_t{1} << 52;
  const Status st = ShmSegment::create(huge, &segment);
  EXPECT_EQ(st.code(), fwSystemError);
  EXPECT_NE(st.message().find(std::to_string(huge) + " bytes"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("/dev/shm has"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("free"), std::string::npos) << st.message();
  EXPECT_FALSE(segment.mapped());
}

TEST(ShmSegment, SizeGrowsWithRanksAndChunks) {
  const size_t two = SharedMemoryNode::segmentBytes(2, 256 << 10);
  const size_t eight = SharedMemoryNode::segmentBytes(8, 256 << 10);
  EXPECT_GE(two, 2 * 2 * (size_t{256} << 10));  // double-buffered input per rank
  // A slot per rank, each with its double-buffered input (how much slack
  // the 2-rank ring adds depends on the CPU, round_ring.h).
  EXPECT_GE(eight, 8 * 2 * (size_t{256} << 10));
  EXPECT_GT(eight, 2 * two);
  EXPECT_EQ(eight % 4096, 0u);
}

// With a CPU per rank rounds of about 2 MiB in all keep a round in the
// caches, each rank's chunk 256 KiB to 1 MiB; with more ranks than CPUs
// rounds of about 16 MiB (each hand-over waits for the scheduler), each
// rank's chunk 256 KiB to 4 MiB; whole cache lines.
TEST(ShmSegment, DefaultChunkGrowsWhenRanksOutnumberTheCpus) {
  constexpr size_t kKiB = 1024, kMiB = 1024 * 1024;
  EXPECT_EQ(SharedMemoryNode::defaultChunkBytes(2, false), 1 * kMiB);
  EXPECT_EQ(SharedMemoryNode::defaultChunkBytes(3, false), (2 * kMiB / 3) & ~size_t{63});
  EXPECT_EQ(SharedMemoryNode::defaultChunkBytes(4, false), 512 * kKiB);
  for (int ranks : {8, 64}) EXPECT_EQ(SharedMemoryNode::defaultChunkBytes(ranks, false), 256 * kKiB);
  EXPECT_EQ(SharedMemoryNode::defaultChunkBytes(2, true), 4 * kMiB);
  EXPECT_EQ(SharedMemoryNode::defaultChunkBytes(3, true), 4 * kMiB);
  EXPECT_EQ(SharedMemoryNode::defaultChunkBytes(4, true), 4 * kMiB);
  EXPECT_EQ(SharedMemoryNode::defaultChunkBytes(8, true), 2 * kMiB);
  EXPECT_EQ(SharedMemoryNode::defaultChunkBytes(12, true), (16 * kMiB / 12) & ~size_t{63});
  EXPECT_EQ(SharedMemoryNode::defaultChunkBytes(64, true), 256 * kKiB);
  EXPECT_EQ(SharedMemoryNode::defaultChunkBytes(1000, true), 256 * kKiB);
}

// A CPU's caches as sysfs describes them, under a directory of the test's.
class FakeCpuCaches {
 public:
  FakeCpuCaches() {
    char pattern[] = "/tmp/fairway-cpu-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    dir_ = pattern;
  }
  ~FakeCpuCaches() { std::filesystem::remove_all(dir_); }
  void add(int index, const char* level, const char* type, const char* size) {
    const std::string at = dir_ + "/cache/index" + std::to_string(index);
    std::filesystem::create_directories(at);
    write(at + "/level", level);
    write(at + "/type", type);
    write(at + "/size", size);
  }
  const std::string& dir() const { return dir_; }

 private:
  static void write(const std::string& path, const char* text) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
      ADD_FAILURE() << path << ": " << std::strerror(errno);
      return;
    }
    std::fprintf(f, "%s\n", text);
    std::fclose(f);
  }
  std::string dir_;
};

// Results stream once the node's outputs outgrow the last-level cache:
// the highest level that holds data, whatever the order of the entries;
// where sysfs says nothing, or nothing readable of that level, the
// fixed fallback rather than a lower level's size.
TEST(ShmSegment, StreamingStartsAtTheLastLevelCache) {
  constexpr size_t kKiB = 1024, kMiB = 1024 * kKiB;
  {
    FakeCpuCaches cpu;
    cpu.add(0, "1", "Data", "32K");
    cpu.add(1, "1", "Instruction", "64K");
    cpu.add(2, "3", "Unified", "8192K");
    cpu.add(3, "2", "Unified", "512K");
    EXPECT_EQ(SharedMemoryNode::defaultStreamingNodeBytes(cpu.dir()), 8 * kMiB);
  }
  {
    FakeCpuCaches cpu;
    cpu.add(0, "1", "Data", "48K");
    cpu.add(1, "2", "Unified", "2M");
    EXPECT_EQ(SharedMemoryNode::defaultStreamingNodeBytes(cpu.dir()), 2 * kMiB);
  }
  {
    FakeCpuCaches cpu;
    cpu.add(0, "2", "Unified", "512K");
    cpu.add(1, "3", "Unified", "lots");
    EXPECT_EQ(SharedMemoryNode::defaultStreamingNodeBytes(cpu.dir()), SharedMemoryNode::kStreamingNodeBytes);
  }
  FakeCpuCaches none;
  EXPECT_EQ(SharedMemoryNode::defaultStreamingNodeBytes(none.dir()), SharedMemoryNode::kStreamingNodeBytes);
  EXPECT_EQ(SharedMemoryNode::defaultStreamingNodeBytes(none.dir() + "/absent"), SharedMemoryNode::kStreamingNodeBytes);
  // This process's CPU's caches, read where sysfs keeps them: the same as
  // CPU 0's on a machine whose cores share one kind of cache.
  EXPECT_EQ(SharedMemoryNode::defaultStreamingNodeBytes(),
            SharedMemoryNode::defaultStreamingNodeBytes("/sys/devices/system/cpu/cpu0"));
}

// Single copies by default only where they were measured faster, on
// Intel CPUs and on others, their cores near or far apart
// (shm_windows.cc); both ends included. Every kind is checked on
// whichever machine runs the test.
TEST(ShmSegment, DefaultSingleCopyWindow) {
  constexpr size_t kKiB = 1024, kMiB = 1024 * 1024;
  using Cores = SharedMemoryNode::Cores;
  for (const Cores cores : {Cores{true, false}, Cores{true, true}, Cores{false, false}, Cores{false, true}}) {
    SCOPED_TRACE(std::string(cores.intel ? "Intel CPUs" : "other CPUs") + (cores.far ? ", far cores" : ", near cores"));
    // Other CPUs' near cores: the segment's rounds win more sizes there;
    // their far cores: the kernel's copy wins less at large sizes.
    const bool narrow = !cores.intel && !cores.far;
    const bool otherFar = !cores.intel && cores.far;
    using DefaultWindow = SharedMemoryNode::SizeWindow (*)(int, bool, Cores);
    // 2 ranks with a CPU each: on Intel CPUs allgather blocks of 8 KiB
    // and all-to-all blocks of 16 KiB to 16 MiB; on others between near
    // cores 256 KiB to 2 MiB and 512 KiB to 2 MiB, between far ones both
    // 16 KiB to 4 MiB.
    struct TwoRankWindow {
      DefaultWindow window;
      size_t from, to;
    };
    const TwoRankWindow twoRankWindows[] = {
        {SharedMemoryNode::defaultAllgatherSingleCopy, narrow ? 256 * kKiB : otherFar ? 16 * kKiB : 8 * kKiB,
         cores.intel ? 16 * kMiB : narrow ? 2 * kMiB : 4 * kMiB},
        {SharedMemoryNode::defaultAlltoallSingleCopy, narrow ? 512 * kKiB : 16 * kKiB,
         cores.intel ? 16 * kMiB : narrow ? 2 * kMiB : 4 * kMiB}};
    for (const TwoRankWindow& w : twoRankWindows) {
      const auto two = w.window(2, false, cores);
      EXPECT_FALSE(two.holds(w.from - 1));
      EXPECT_TRUE(two.holds(w.from));
      EXPECT_TRUE(two.holds(w.to));
      EXPECT_FALSE(two.holds(w.to + 1));
      for (auto [ranks, oversubscribed] : {std::pair{2, true}, std::pair{3, false}, std::pair{8, false}}) {
        EXPECT_FALSE(w.window(ranks, oversubscribed, cores).holds(1 * kMiB)) << ranks << " ranks";
      }
    }
    for (int ranks : {3, 4, 8}) {
      EXPECT_FALSE(SharedMemoryNode::defaultAllgatherSingleCopy(ranks, true, cores).holds(1 * kMiB));
    }
    // More ranks than CPUs: all-to-all from 32 KiB blocks at 8 ranks and
    // more, below that from 64 KiB on Intel CPUs and 128 KiB on others,
    // near or far (no two ranks' cores are measured there).
    const size_t fewRanksFrom = cores.intel ? 64 * kKiB : 128 * kKiB;
    for (auto [ranks, from] : {std::pair{3, fewRanksFrom}, std::pair{4, fewRanksFrom}, std::pair{7, fewRanksFrom},
                               std::pair{8, 32 * kKiB}, std::pair{16, 32 * kKiB}}) {
      const auto alltoall = SharedMemoryNode::defaultAlltoallSingleCopy(ranks, true, cores);
      EXPECT_FALSE(alltoall.holds(from - 1)) << ranks << " ranks";
      EXPECT_TRUE(alltoall.holds(from)) << ranks << " ranks";
      EXPECT_TRUE(alltoall.holds(size_t{1} << 32)) << ranks << " ranks: no upper end";
    }
    // In place, all-to-all blocks are staged in the segment, not swapped,
    // on other CPUs' near cores (and wherever no two ranks' cores are
    // measured, as with more ranks than CPUs).
    EXPECT_EQ(SharedMemoryNode::defaultStagesAlltoallInPlace(cores), narrow);
    EXPECT_EQ(SharedMemoryNode::defaultSingleCopyWindows(4, true, cores).stagesAlltoall, narrow);
    // Broadcasts: 32 KiB (below, the segment's rounds run ahead) to 32 MiB
    // on Intel CPUs; on others 2 to 3 MiB between near cores, 16 KiB to 16
    // MiB between far ones.
    const auto broadcast = SharedMemoryNode::defaultBroadcastSingleCopy(2, false, cores);
    const size_t broadcastFrom = narrow ? 2 * kMiB : otherFar ? 16 * kKiB : 32 * kKiB;
    const size_t broadcastUpTo = cores.intel ? 32 * kMiB : narrow ? 3 * kMiB : 16 * kMiB;
    EXPECT_FALSE(broadcast.holds(broadcastFrom - 1));
    EXPECT_TRUE(broadcast.holds(broadcastFrom));
    EXPECT_TRUE(broadcast.holds(broadcastUpTo));
    EXPECT_FALSE(broadcast.holds(broadcastUpTo + 1));
    EXPECT_FALSE(SharedMemoryNode::defaultBroadcastSingleCopy(2, true, cores).holds(1 * kMiB));
    EXPECT_FALSE(SharedMemoryNode::defaultBroadcastSingleCopy(4, false, cores).holds(1 * kMiB));
    // Reduce-scatters: 2 ranks with a CPU each on other CPUs' far cores
    // 32 KiB to 16 MiB, else never; more ranks than CPUs from 1 MiB up to
    // 4 ranks and from 4 MiB past them, with no upper end; more ranks
    // with a CPU each never.
    const auto reduceScatter = SharedMemoryNode::defaultReduceScatterSingleCopy(2, false, cores);
    if (otherFar) {
      EXPECT_FALSE(reduceScatter.holds(32 * kKiB - 1));
      EXPECT_TRUE(reduceScatter.holds(32 * kKiB));
      EXPECT_TRUE(reduceScatter.holds(16 * kMiB));
      EXPECT_FALSE(reduceScatter.holds(16 * kMiB + 1));
    } else {
      EXPECT_FALSE(reduceScatter.holds(4 * kMiB));
    }
    for (auto [ranks, from] : {std::pair{2, 1 * kMiB}, std::pair{4, 1 * kMiB}, std::pair{5, 4 * kMiB},
                               std::pair{8, 4 * kMiB}}) {
      const auto oversubscribed = SharedMemoryNode::defaultReduceScatterSingleCopy(ranks, true, cores);
      EXPECT_FALSE(oversubscribed.holds(from - 1)) << ranks << " ranks";
      EXPECT_TRUE(oversubscribed.holds(from)) << ranks << " ranks";
      EXPECT_TRUE(oversubscribed.holds(size_t{1} << 32)) << ranks << " ranks: no upper end";
    }
    EXPECT_FALSE(SharedMemoryNode::defaultReduceScatterSingleCopy(3, false, cores).holds(4 * kMiB));
  }
  // Far from kFarRoundTripNs on, near below it and where not measured (0).
  const uint32_t far = SharedMemoryNode::kFarRoundTripNs;
  EXPECT_TRUE(SharedMemoryNode::coresOf(false, far).far);
  EXPECT_FALSE(SharedMemoryNode::coresOf(false, far - 1).far);
  EXPECT_FALSE(SharedMemoryNode::coresOf(false, 0).far);
  EXPECT_TRUE(SharedMemoryNode::coresOf(true, 0).intel);
  // Allreduces: 2 ranks with a CPU each, 2 to 8 MiB, on other CPUs' near
  // cores 2 to 3 MiB; 3 or 4 ranks on fewer CPUs from 4 MiB.
  for (const Cores cores : {Cores{true, false}, Cores{true, true}, Cores{false, false}, Cores{false, true}}) {
    const auto allreduce = SharedMemoryNode::defaultAllreduceSingleCopy(2, false, cores);
    const size_t upTo = !cores.intel && !cores.far ? 3 * kMiB : 8 * kMiB;
    EXPECT_FALSE(allreduce.holds(2 * kMiB - 1));
    EXPECT_TRUE(allreduce.holds(2 * kMiB));
    EXPECT_TRUE(allreduce.holds(upTo));
    EXPECT_FALSE(allreduce.holds(upTo + 1));
    for (auto [ranks, oversubscribed] : {std::pair{2, true}, std::pair{3, false}, std::pair{8, true}}) {
      EXPECT_FALSE(SharedMemoryNode::defaultAllreduceSingleCopy(ranks, oversubscribed, cores).holds(4 * kMiB))
          << ranks;
    }
    // 3 or 4 ranks on fewer CPUs: from 4 MiB, with no upper end.
    for (int ranks : {3, 4}) {
      const auto shared = SharedMemoryNode::defaultAllreduceSingleCopy(ranks, true, cores);
      EXPECT_FALSE(shared.holds(4 * kMiB - 1)) << ranks;
      EXPECT_TRUE(shared.holds(4 * kMiB)) << ranks;
      EXPECT_TRUE(shared.holds(size_t{1} << 32)) << ranks;
    }
  }
  EXPECT_FALSE(SharedMemoryNode::SizeWindow{}.holds(0));  // the empty window holds nothing
}

// Two threads handing a line back and forth measure a round trip; one
// whose partner never comes gives up within its bound, with 0.
TEST(ShmSegment, RoundTripIsMeasuredAndBounded) {
  alignas(64) std::atomic<uint32_t> served{0};
  alignas(64) std::atomic<uint32_t> returned{0};
  uint32_t returnerNs = 0;
  // Between two cores a few hundred ns; where the threads share a core,
  // the line passes at each time slice, milliseconds: a bound of 10 s
  // holds the 256 trips either way.
  std::thread returner([&] { returnerNs = handLineRoundTripNs(returned, served, false, 10000); });
  const uint32_t serverNs = handLineRoundTripNs(served, returned, true, 10000);
  returner.join();
  EXPECT_GT(serverNs, 0u);
  EXPECT_GT(returnerNs, 0u);
  std::printf("round trip between the two threads: %u ns (server), %u ns (returner)\n", serverNs, returnerNs);

  alignas(64) std::atomic<uint32_t> alone{0}, nobody{0};
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(handLineRoundTripNs(alone, nobody, true, 20), 0u);
  EXPECT_EQ(handLineRoundTripNs(alone, nobody, false, 20), 0u);
  const auto tookMs =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(tookMs, 40);
  EXPECT_LT(tookMs, 2000);
}

}  // namespace
}  // namespace fairway
