// The placement of the shared-memory rounds' inputs (round_ring.h): every
// region, with the slack a round may use past its bytes, inside the ring's
// area, none overlapping the round before it, cache-line aligned where the
// chunk allows, and pieces from kWalkFromBytes walked around the ring
// rather than put back in the same place.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "providers/shm/round_ring.h"

namespace fairway {
namespace {

struct Region {
  size_t at, bytes;
};

bool overlap(Region a, Region b) {
  return a.bytes > 0 && b.bytes > 0 && a.at < b.at + b.bytes && b.at < a.at + a.bytes;
}

// Places `rounds` random sizes (0 to a chunk, skewed towards the edges
// the rule halves at), some walking whatever their size, and checks every
// placement, and that the ring names a round no earlier than the latest
// one sharing bytes with each (from every round placed so far).
void checkRandomRounds(size_t chunkBytes, bool walk, size_t walkFrom, unsigned seed, int rounds) {
  std::mt19937_64 random(seed);
  RoundRing ring(chunkBytes, walk, walkFrom);
  Region last{0, 0};
  std::vector<Region> placed;  // by round
  for (int g = 0; g < rounds; ++g) {
    size_t bytes = 0;
    switch (random() % 4) {
      case 0: bytes = random() % (chunkBytes + 1); break;
      case 1: bytes = chunkBytes >> (random() % 12); break;  // a power-of-two fraction
      case 2: bytes = (chunkBytes >> (random() % 12)) + 1; break;  // just past one
      default: bytes = random() % 200; break;  // small rounds, 0 included
    }
    bytes = std::min(bytes, chunkBytes);  // a round holds at most a chunk
    // Spans from one unit to the whole ring, whole or not a power of two.
    const size_t spans[] = {RoundRing::kWholeRing, RoundRing::kNearSpanBytes, chunkBytes / 2, 3 * chunkBytes / 4,
                            chunkBytes, 2 * chunkBytes, 4096};
    const size_t span = spans[random() % 7];
    const bool walkAnySize = random() % 3 == 0;
    const size_t at = ring.place(bytes, span, static_cast<uint32_t>(g), walkAnySize);
    const Region region{at, bytes == 0 ? 0 : bytes + RoundRing::kSlackBytes};
    SCOPED_TRACE("chunk " + std::to_string(chunkBytes) + (walk ? ", walking from " + std::to_string(walkFrom) : "") +
                 (walkAnySize ? ", this round walking" : "") + ", span " + std::to_string(span) + ", round " +
                 std::to_string(g) + ": " + std::to_string(bytes) + " bytes at " + std::to_string(at) +
                 ", the last round's " + std::to_string(last.bytes) + " at " + std::to_string(last.at));
    ASSERT_EQ(ring.at(), at);
    ASSERT_LE(at + region.bytes, RoundRing::areaBytes(chunkBytes, walkFrom));
    if (chunkBytes % 64 == 0) {
      ASSERT_EQ(at % 64, 0u);
    }
    ASSERT_FALSE(overlap(region, last));
    int latest = -1;
    for (int h = g - 1; h >= 0 && latest < 0; --h) {
      if (overlap(region, placed[static_cast<size_t>(h)])) latest = h;
    }
    // Named by unit: at or after the latest round whose bytes it shares,
    // never the round before.
    if (latest >= 0) {
      ASSERT_TRUE(ring.reusesBytes());
      ASSERT_GE(ring.reusedRound(), static_cast<uint32_t>(latest));
    }
    if (ring.reusesBytes()) {
      ASSERT_LE(static_cast<int>(ring.reusedRound()), g - 2);
    }
    placed.push_back(region);
    if (bytes > 0) last = region;
  }
}

TEST(RoundRing, ConsecutiveRoundsNeverOverlapAndStayInside) {
  for (size_t chunk : {size_t{4096}, size_t{262144}, size_t{262144 + 64}, size_t{100000}, size_t{4097},
                       size_t{1} << 22}) {
    for (bool walk : {true, false}) {
      // Walking from the two sizes the CPUs use (round_ring.h).
      for (size_t walkFrom : {RoundRing::kWalkFromBytes, RoundRing::kWalkFromBytesIntel}) {
        checkRandomRounds(chunk, walk, walkFrom, static_cast<unsigned>(chunk + walk + walkFrom), 5000);
      }
    }
  }
}

// Places each round's bytes in turn and expects each at its offset in the
// ring of two chunks, which lies kSlackBytes further on for every unit
// (the smallest slot) before it.
void expectPlaces(RoundRing& ring, size_t unit, std::initializer_list<std::pair<size_t, size_t>> rounds) {
  uint32_t round = 0;
  for (const auto& [bytes, at] : rounds) {
    EXPECT_EQ(ring.place(bytes, RoundRing::kWholeRing, round++), at + RoundRing::kSlackBytes * (at / unit))
        << bytes << " bytes";
  }
}
// The smallest slot of a ring of 256 KiB chunks, walking or not: 32 KiB,
// where a round of kWalkFromBytes stops halving it.
constexpr size_t kWalkingUnit = 32768;

TEST(RoundRing, TheAreaHoldsTwoChunksAndTheSlackAfterEachUnit) {
  EXPECT_EQ(RoundRing::areaBytes(262144), 2 * 262144 + 16 * RoundRing::kSlackBytes);
  // A chunk of no whole number of 128 bytes is never halved.
  EXPECT_EQ(RoundRing::areaBytes(100000), 2 * 100000 + 2 * RoundRing::kSlackBytes);
}

TEST(RoundRing, FullChunksAlternateBetweenTheHalves) {
  RoundRing ring(262144, true);
  expectPlaces(ring, kWalkingUnit, {{262144, 0}, {262144, 262144}, {200000, 0}, {131073, 262144}});
}

TEST(RoundRing, SmallerPiecesWalkTheWholeRing) {
  RoundRing ring(262144, true);
  std::set<size_t> places;
  for (uint32_t g = 0; g < 8; ++g) places.insert(ring.place(65536, RoundRing::kWholeRing, g));
  // Every second unit: the slack after each shifts a place 128 bytes on.
  EXPECT_EQ(places, (std::set<size_t>{0, 65664, 131328, 196992, 262656, 328320, 393984, 459648}));
  expectPlaces(ring, kWalkingUnit, {
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

// Rounds of up to half the span walk only that far; a larger round, or one
// whose start the last round still holds, goes on as without a span.
TEST(RoundRing, ASpanKeepsSmallerPiecesNearTheStart) {
  constexpr size_t kMiB = 1024 * 1024, kUnit = 32768;  // a walking ring of 1 MiB chunks
  RoundRing ring(kMiB, true);
  uint32_t round = 0;
  auto placed = [&](size_t bytes, size_t span) {  // the virtual offset, the slack taken out
    return ring.place(bytes, span, round++) / (kUnit + RoundRing::kSlackBytes) * kUnit;
  };
  std::set<size_t> places;
  for (int g = 0; g < 16; ++g) places.insert(placed(131072, RoundRing::kNearSpanBytes));
  EXPECT_EQ(places, (std::set<size_t>{0, 131072, 262144, 393216}));
  EXPECT_EQ(placed(262144, RoundRing::kNearSpanBytes), 0u);  // after 393216: past the span, the start free
  EXPECT_EQ(placed(262144, RoundRing::kNearSpanBytes), 262144u);
  EXPECT_EQ(placed(524288, RoundRing::kNearSpanBytes), 524288u);  // more than half the span: not held back
  EXPECT_EQ(placed(131072, RoundRing::kNearSpanBytes), 0u);
  EXPECT_EQ(placed(kMiB, RoundRing::kNearSpanBytes), kMiB);
  // The last round holds the start: the next goes on past it though beyond the span.
  EXPECT_EQ(placed(kMiB, RoundRing::kNearSpanBytes), 0u);
  EXPECT_EQ(placed(131072, RoundRing::kNearSpanBytes), kMiB);
}

// Walking from 4 KiB (Intel CPUs): the unit is 4 KiB, so rounds of 4 KiB
// and more walk (each a unit or more further on) and smaller ones keep to
// the halves.
TEST(RoundRing, WalkingFromFourKiBWalksRoundsOfFourKiB) {
  RoundRing ring(262144, true, RoundRing::kWalkFromBytesIntel);
  EXPECT_EQ(RoundRing::areaBytes(262144, RoundRing::kWalkFromBytesIntel),
            2 * 262144 + 128 * RoundRing::kSlackBytes);
  expectPlaces(ring, 4096, {{4096, 0}, {4096, 4096}, {8192, 8192}, {4095, 262144}, {4096, 266240}, {4095, 0},
                            {2048, 262144}});
}

// Without walking, every round alternates between the halves.
TEST(RoundRing, WithoutWalkingRoundsAlternateBetweenTheHalves) {
  RoundRing ring(262144, false);
  expectPlaces(ring, kWalkingUnit, {{65536, 0}, {32768, 262144}, {0, 262144}, {262144, 0}, {1, 262144}});
}

// A round told to walk does so in any ring and at any size, in slots down
// to the unit; the ring names the last round that used its bytes.
TEST(RoundRing, ARoundMayWalkAtAnySizeAndNamesTheRoundItReuses) {
  RoundRing ring(262144, false);
  EXPECT_EQ(ring.place(100, RoundRing::kWholeRing, 0, true), 0u);
  EXPECT_FALSE(ring.reusesBytes());
  EXPECT_EQ(ring.place(100, RoundRing::kWholeRing, 1, true), kWalkingUnit + RoundRing::kSlackBytes);
  EXPECT_EQ(ring.place(40000, RoundRing::kWholeRing, 2, true), 2 * (kWalkingUnit + RoundRing::kSlackBytes));
  EXPECT_FALSE(ring.reusesBytes());
  // A round that does not walk goes to the next half: the first unit of
  // the second half was not used yet.
  EXPECT_EQ(ring.place(100, RoundRing::kWholeRing, 3), 8 * (kWalkingUnit + RoundRing::kSlackBytes));
  EXPECT_FALSE(ring.reusesBytes());
  // The first half's start, last used by round 0.
  EXPECT_EQ(ring.place(200000, RoundRing::kWholeRing, 4), 0u);
  ASSERT_TRUE(ring.reusesBytes());
  EXPECT_EQ(ring.reusedRound(), 2u);  // rounds 0, 1 and 2 lay there, 2 last
  // Walking on past round 4's region: unit 7, free, then unit 8, round 3's.
  EXPECT_EQ(ring.place(32768, RoundRing::kWholeRing, 5, true), 7 * (kWalkingUnit + RoundRing::kSlackBytes));
  EXPECT_FALSE(ring.reusesBytes());
  ring.place(32768, RoundRing::kWholeRing, 6, true);
  ASSERT_TRUE(ring.reusesBytes());
  EXPECT_EQ(ring.reusedRound(), 3u);
}

}  // namespace
}  // namespace fairway
