// The placement of the shared-memory rounds' inputs (round_ring.h): every
// region inside the ring, none overlapping the round before it, cache-line
// aligned where the chunk allows, and pieces from kWalkFromBytes walked
// around the ring rather than put back in the same place.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <utility>

#include "comm/shm/round_ring.h"

namespace fairway {
namespace {

struct Region {
  size_t at, bytes;
};

bool overlap(Region a, Region b) {
  return a.bytes > 0 && b.bytes > 0 && a.at < b.at + b.bytes && b.at < a.at + a.bytes;
}

// Places `rounds` random sizes (0 to a chunk, skewed towards the edges
// the rule halves at) and checks every placement.
void checkRandomRounds(size_t chunkBytes, bool walk, unsigned seed, int rounds) {
  std::mt19937_64 random(seed);
  RoundRing ring(chunkBytes, walk);
  Region last{0, 0};
  for (int g = 0; g < rounds; ++g) {
    size_t bytes = 0;
    switch (random() % 4) {
      case 0: bytes = random() % (chunkBytes + 1); break;
      case 1: bytes = chunkBytes >> (random() % 12); break;  // a power-of-two fraction
      case 2: bytes = (chunkBytes >> (random() % 12)) + 1; break;  // just past one
      default: bytes = random() % 200; break;  // small rounds, 0 included
    }
    bytes = std::min(bytes, chunkBytes);  // a round holds at most a chunk
    const size_t at = ring.place(bytes);
    const Region region{at, bytes};
    SCOPED_TRACE("chunk " + std::to_string(chunkBytes) + (walk ? ", walking" : "") + ", round " +
                 std::to_string(g) + ": " + std::to_string(bytes) + " bytes at " + std::to_string(at) +
                 ", the last round's " + std::to_string(last.bytes) + " at " + std::to_string(last.at));
    ASSERT_EQ(ring.at(), at);
    ASSERT_LE(at + bytes, 2 * chunkBytes);
    if (chunkBytes % 64 == 0) {
      ASSERT_EQ(at % 64, 0u);
    }
    ASSERT_FALSE(overlap(region, last));
    if (bytes > 0) last = region;
  }
}

TEST(RoundRing, ConsecutiveRoundsNeverOverlapAndStayInside) {
  for (size_t chunk : {size_t{4096}, size_t{262144}, size_t{262144 + 64}, size_t{100000}, size_t{4097},
                       size_t{1} << 22}) {
    for (bool walk : {true, false}) checkRandomRounds(chunk, walk, static_cast<unsigned>(chunk + walk), 20000);
  }
}

// Places each round's bytes in turn and expects each at its offset.
void expectPlaces(RoundRing& ring, std::initializer_list<std::pair<size_t, size_t>> rounds) {
  for (const auto& [bytes, at] : rounds) EXPECT_EQ(ring.place(bytes), at) << bytes << " bytes";
}

TEST(RoundRing, FullChunksAlternateBetweenTheHalves) {
  RoundRing ring(262144, true);
  expectPlaces(ring, {{262144, 0}, {262144, 262144}, {200000, 0}, {131073, 262144}});
}

TEST(RoundRing, SmallerPiecesWalkTheWholeRing) {
  RoundRing ring(262144, true);
  std::set<size_t> places;
  for (int g = 0; g < 8; ++g) places.insert(ring.place(65536));
  EXPECT_EQ(places, (std::set<size_t>{0, 65536, 131072, 196608, 262144, 327680, 393216, 458752}));
  expectPlaces(ring, {
                         {65536, 0},  // round again
                         // A round of 32 KiB still walks, from the next multiple of its size.
                         {RoundRing::kWalkFromBytes, 65536},
                         {RoundRing::kWalkFromBytes, 98304},
                         {0, 98304},  // an empty round moves nothing
                         // Smaller ones keep to the halves: the one after the last region.
                         {100, 262144},
                         {100, 0},
                         {RoundRing::kWalkFromBytes - 1, 262144},
                         {65536, 327680},
                     });
}

// Without walking, every round alternates between the halves.
TEST(RoundRing, WithoutWalkingRoundsAlternateBetweenTheHalves) {
  RoundRing ring(262144, false);
  expectPlaces(ring, {{65536, 0}, {32768, 262144}, {0, 262144}, {262144, 0}, {1, 262144}});
}

}  // namespace
}  // namespace fairway
