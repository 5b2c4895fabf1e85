// The cache of peers' mapped allocations (PeerMappings), on this process's
// own allocations taken as a peer's: what a call views stays mapped for
// the call, and between calls the cache keeps at most kMostMappings.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "providers/shm/mappable_memory.h"

namespace fairway {
namespace {

int memfdMappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) n += line.find("memfd:fairway-host-memory") != std::string::npos;
  return n;
}

TEST(PeerMappings, KeepWhatTheCallViewsAndAtMostTheirLimitBetweenCalls) {
  constexpr size_t kAllocations = PeerMappings::kMostMappings + 6;
  std::vector<void*> buffers(kAllocations);
  std::vector<MappableAllocation> described(kAllocations);
  for (size_t i = 0; i < kAllocations; ++i) {
    ASSERT_TRUE(allocateMappable(4096, &buffers[i]).isOk());
    static_cast<char*>(buffers[i])[0] = static_cast<char>(i);
    ASSERT_TRUE(findMappable(buffers[i], 4096, &described[i]));
  }
  const int own = memfdMappings();
  {
    PeerMappings mappings({getpid()});
    // One call views them all: none may go while it runs.
    mappings.beginCall();
    std::vector<char*> views;
    for (const MappableAllocation& a : described) views.push_back(mappings.view(0, a));
    for (size_t i = 0; i < kAllocations; ++i) {
      ASSERT_NE(views[i], nullptr) << i;
      EXPECT_EQ(views[i][0], static_cast<char>(i)) << "the view is another allocation's";
    }
    EXPECT_EQ(memfdMappings(), own + static_cast<int>(kAllocations));
    // The next call views one more: the idle ones past the limit go.
    mappings.beginCall();
    EXPECT_NE(mappings.view(0, described[0]), nullptr);
    EXPECT_EQ(memfdMappings(), own + static_cast<int>(PeerMappings::kMostMappings));
    // A described allocation that is not the file under that descriptor is refused.
    MappableAllocation wrong = described[1];
    wrong.inode += 1;
    wrong.id = 1u << 30;
    EXPECT_EQ(mappings.view(0, wrong), nullptr);
  }
  EXPECT_EQ(memfdMappings(), own);  // the cache unmaps what it mapped
  for (void* b : buffers) EXPECT_TRUE(freeMappable(b).isOk());
  EXPECT_EQ(memfdMappings(), 0);
}

}  // namespace
}  // namespace fairway
