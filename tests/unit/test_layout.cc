// Chunk layouts, the ring schedule's unit numbering, and node grouping.
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/chunk_layout.h"

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

}  // namespace
}  // namespace fairway
