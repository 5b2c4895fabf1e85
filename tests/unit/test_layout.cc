// Chunk layouts, the ring schedule's unit numbering, node grouping, and how
// two-phase cuts a buffer into pipeline slices.
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/chunk_layout.h"
#include "algorithms/two_phase.h"

namespace fairway {
namespace {

TEST(ChunkLayout, CoversTheBufferWithoutGaps) {
  for (size_t count : {0u, 1u, 7u, 1000003u}) {
    for (int n : {1, 2, 3, 8}) {
      ChunkLayout l{count, n};
      size_t next = 0;
      for (int c = 0; c < n; ++c) {
        EXPECT_EQ(l.chunkOffset(c), next);
        next += l.chunkCount(c);
      }
      EXPECT_EQ(next, count);
    }
  }
}

// A receiver's unit k at step t must be the message its left neighbour
// numbered k: both walk the same chunk sequence. lag 2 is the reduce-scatter
// (received chunk r-t-2, forwarded next step), lag 1 the allgather.
TEST(RingCursor, SenderAndReceiverNumberUnitsAlike) {
  for (int lag : {1, 2}) {
    for (int n : {2, 3, 5}) {
      ChunkLayout layout{37, n};
      Segments seg{4};
      for (int r = 0; r < n; ++r) {
        int left = positiveMod(r - 1, n);
        // The left neighbour's own first chunk is what r receives at step 0.
        int leftFirst = positiveMod(left - (lag - 1), n);
        size_t leftFirstSegments = seg.countFor(layout.chunkCount(leftFirst));
        RingCursor mine(layout, seg, r, lag);
        RingCursor theirs(layout, seg, left, lag);
        // Units r receives at step t+1 are the ones left received at step t,
        // renumbered past left's first chunk.
        std::vector<std::pair<int, size_t>> received;
        for (; !mine.atEnd(); mine.advance()) received.push_back({mine.chunk(), mine.segment()});
        std::vector<std::pair<int, size_t>> sentByLeft;
        for (size_t j = 0; j < leftFirstSegments; ++j) sentByLeft.push_back({leftFirst, j});
        for (; !theirs.atEnd(); theirs.advance()) {
          if (theirs.step() < n - 2) sentByLeft.push_back({theirs.chunk(), theirs.segment()});
        }
        EXPECT_EQ(received, sentByLeft) << "n=" << n << " r=" << r << " lag=" << lag;
      }
    }
  }
}

TEST(SliceCount, FollowsSliceBytesOnLargeBuffers) {
  PipelineSettings p;  // 1 MiB slices, 64 KiB shard floor, 8 in flight
  EXPECT_EQ(sliceCount(p, size_t{256} << 20, (size_t{32} << 20) / 4, 1, 4), 256u);
}

TEST(SliceCount, KeepsTwoPipelinesWhereTheShardFloorAllows) {
  PipelineSettings p;
  // 4 MiB over 8 ranks: 4 slices by size, 16 by depth, 8 by the floor.
  EXPECT_EQ(sliceCount(p, size_t{4} << 20, (size_t{512} << 10) / 4, 1, 4), 8u);
  p.slicesInFlight = 1;  // no overlap: depth asks for 2 only
  EXPECT_EQ(sliceCount(p, size_t{1} << 20, (size_t{512} << 10) / 4, 1, 4), 2u);
}

TEST(SliceCount, NeverCutsShardsBelowTheFloorOrSlicesBelowOneElement) {
  PipelineSettings p;
  EXPECT_EQ(sliceCount(p, size_t{1} << 20, 1000, 8, 4), 1u);  // 500-byte shards: one slice
  EXPECT_EQ(sliceCount(p, 64, 0, 1, 4), 1u);
  p.minShardBytes = 1;
  EXPECT_EQ(sliceCount(p, size_t{1} << 20, 3, 1, 4), 3u);  // no more slices than elements
}

}  // namespace
}  // namespace fairway
