// The node's shared-memory segment on its own: created zeroed and
// reserved, opened by name, refused with the size and the free space when
// /dev/shm cannot hold it, and never left in /dev/shm once unlinked.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "providers/shm/shm_node.h"
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

// Single copies by default only where they were measured faster, on
// Intel CPUs and on others (shm_windows.cc); both ends included. Both
// kinds of CPU are checked on whichever machine runs the test.
TEST(ShmSegment, DefaultSingleCopyWindow) {
  constexpr size_t kKiB = 1024, kMiB = 1024 * 1024;
  for (const bool intel : {true, false}) {
    SCOPED_TRACE(intel ? "Intel CPUs" : "other CPUs");
    using DefaultWindow = SharedMemoryNode::SizeWindow (*)(int, bool, bool);
    // 2 ranks with a CPU each: on Intel CPUs allgather blocks of 8 KiB and
    // all-to-all blocks of 16 KiB to 16 MiB; on others 256 KiB to 4 MiB
    // and 512 KiB to 2 MiB (the segment's rounds win more there).
    struct TwoRankWindow {
      DefaultWindow window;
      size_t from, to;
    };
    const TwoRankWindow twoRankWindows[] = {
        {SharedMemoryNode::defaultAllgatherSingleCopy, intel ? 8 * kKiB : 256 * kKiB, intel ? 16 * kMiB : 4 * kMiB},
        {SharedMemoryNode::defaultAlltoallSingleCopy, intel ? 16 * kKiB : 512 * kKiB, intel ? 16 * kMiB : 2 * kMiB}};
    for (const TwoRankWindow& w : twoRankWindows) {
      const auto two = w.window(2, false, intel);
      EXPECT_FALSE(two.holds(w.from - 1));
      EXPECT_TRUE(two.holds(w.from));
      EXPECT_TRUE(two.holds(w.to));
      EXPECT_FALSE(two.holds(w.to + 1));
      for (auto [ranks, oversubscribed] : {std::pair{2, true}, std::pair{3, false}, std::pair{8, false}}) {
        EXPECT_FALSE(w.window(ranks, oversubscribed, intel).holds(1 * kMiB)) << ranks << " ranks";
      }
    }
    for (int ranks : {3, 4, 8}) {
      EXPECT_FALSE(SharedMemoryNode::defaultAllgatherSingleCopy(ranks, true, intel).holds(1 * kMiB));
    }
    // More ranks than CPUs: all-to-all from 32 KiB blocks at 8 ranks and
    // more, below that from 64 KiB on Intel CPUs and 256 KiB on others.
    const size_t fewRanksFrom = intel ? 64 * kKiB : 256 * kKiB;
    for (auto [ranks, from] : {std::pair{3, fewRanksFrom}, std::pair{4, fewRanksFrom}, std::pair{7, fewRanksFrom},
                               std::pair{8, 32 * kKiB}, std::pair{16, 32 * kKiB}}) {
      const auto alltoall = SharedMemoryNode::defaultAlltoallSingleCopy(ranks, true, intel);
      EXPECT_FALSE(alltoall.holds(from - 1)) << ranks << " ranks";
      EXPECT_TRUE(alltoall.holds(from)) << ranks << " ranks";
      EXPECT_TRUE(alltoall.holds(size_t{1} << 32)) << ranks << " ranks: no upper end";
    }
    // Broadcasts: 32 KiB (below, the segment's rounds run ahead) to 32 MiB
    // on Intel CPUs, 2 to 8 MiB on others (the kernel's copy is slower
    // there, and the rounds faster below).
    const auto broadcast = SharedMemoryNode::defaultBroadcastSingleCopy(2, false, intel);
    const size_t broadcastFrom = intel ? 32 * kKiB : 2 * kMiB;
    const size_t broadcastUpTo = intel ? 32 * kMiB : 8 * kMiB;
    EXPECT_FALSE(broadcast.holds(broadcastFrom - 1));
    EXPECT_TRUE(broadcast.holds(broadcastFrom));
    EXPECT_TRUE(broadcast.holds(broadcastUpTo));
    EXPECT_FALSE(broadcast.holds(broadcastUpTo + 1));
    EXPECT_FALSE(SharedMemoryNode::defaultBroadcastSingleCopy(2, true, intel).holds(1 * kMiB));
    EXPECT_FALSE(SharedMemoryNode::defaultBroadcastSingleCopy(4, false, intel).holds(1 * kMiB));
  }
  // Allreduces: 2 ranks with a CPU each, 2 to 8 MiB, whatever the CPU.
  const auto allreduce = SharedMemoryNode::defaultAllreduceSingleCopy(2, false);
  EXPECT_FALSE(allreduce.holds(2 * kMiB - 1));
  EXPECT_TRUE(allreduce.holds(2 * kMiB));
  EXPECT_TRUE(allreduce.holds(8 * kMiB));
  EXPECT_FALSE(allreduce.holds(8 * kMiB + 1));
  for (auto [ranks, oversubscribed] : {std::pair{2, true}, std::pair{3, false}, std::pair{4, true}}) {
    EXPECT_FALSE(SharedMemoryNode::defaultAllreduceSingleCopy(ranks, oversubscribed).holds(4 * kMiB)) << ranks;
  }
  EXPECT_FALSE(SharedMemoryNode::SizeWindow{}.holds(0));  // the empty window holds nothing
}

}  // namespace
}  // namespace fairway
