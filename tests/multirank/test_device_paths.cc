// Device buffers without a GPU: under the host-emulated device runtime
// (FAIRWAY_DEVICE_RUNTIME=host-emulated) "device" memory is host memory the
// runtime recognises and streams are threads running their work later, in
// order. The core cannot tell: it plans and runs its device paths as on a
// GPU machine, and this sweep checks every collective there against the
// reference, on one node and on two emulated nodes. The Gpu.* tests run the
// same paths on a real GPU.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/multirank/collective_sweep.h"
#include "transports/emulated/emulated_device.h"

namespace fairway::testing {
namespace {

// The runtime's test hooks, from the same library the core loaded.
const EmulatedDeviceHooks* emulatedDevice() {
  static const EmulatedDeviceHooks* hooks = [] {
    void* handle = dlopen(FAIRWAY_EMULATED_DEVICE_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return static_cast<const EmulatedDeviceHooks*>(nullptr);
    auto entry = reinterpret_cast<FairwayEmulatedDeviceEntry>(dlsym(handle, FAIRWAY_EMULATED_DEVICE_SYMBOL));
    return entry ? entry() : nullptr;
  }();
  return hooks;
}

int synchronizeStream(fwStream_t stream) { return emulatedDevice()->synchronize(stream, 60000); }

// fwMemAlloc hands out the runtime's device memory: the core classifies
// it as device memory, and fwMemFree refuses anything else.
TEST(EmulatedDevice, MemAllocGivesDeviceMemory) {
  void* memory = nullptr;
  ASSERT_EQ(fwMemAlloc(&memory, 4096), fwSuccess) << fwGetLastErrorMessage();
  ASSERT_NE(memory, nullptr);
  ASSERT_NE(emulatedDevice(), nullptr) << dlerror();
  int onTheStack = 0;
  EXPECT_EQ(fwMemFree(&onTheStack), fwInvalidArgument);
  EXPECT_NE(std::string(fwGetLastErrorMessage()).find("not device memory"), std::string::npos)
      << fwGetLastErrorMessage();
  EXPECT_EQ(fwMemFree(memory), fwSuccess);
  EXPECT_EQ(fwMemFree(memory), fwInvalidArgument);  // freed: no longer device memory
}

struct Layout {
  const char* name;
  std::vector<std::string> nodeOfRank;
};
const Layout kLayouts[] = {
    {"1x4", {"a", "a", "a", "a"}},
    {"2x2", {"a", "a", "b", "b"}},
};

class StagedDeviceSweep : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(StagedDeviceSweep, MatchesReference) {
  const CollectiveCase& c = collectiveCases()[std::get<0>(GetParam())];
  const Layout& layout = kLayouts[std::get<1>(GetParam())];
  const int nranks = static_cast<int>(layout.nodeOfRank.size());
  auto outcomes = runRanks(nranks, [&](const RankContext& ctx) {
    // Small slices, so a staged call pipelines several of them.
    setenv("FAIRWAY_STAGING_SLICE_BYTES", "65536", 1);
    if (emulatedDevice() == nullptr) {
      reportFailure(ctx, std::string("no host-emulated device runtime: ") + dlerror());
      return 1;
    }
    SweepOptions options;
    options.nodeOfRank = layout.nodeOfRank;
    options.deviceMemory = true;
    options.stream = emulatedDevice()->createStream();
    options.synchronize = synchronizeStream;
    int failures = sweepCollective(ctx, c, options);
    emulatedDevice()->destroyStream(options.stream);
    return failures;
  });
  for (int r = 0; r < nranks; ++r) {
    EXPECT_EQ(outcomes[r].exitCode, 0) << c.name << " on " << layout.name << ": rank " << r << " failed";
    EXPECT_FALSE(outcomes[r].timedOut) << "rank " << r << " hung";
  }
}

// The collectives themselves (the forced-algorithm variants are host
// algorithms the staged path reaches through the host call).
std::vector<int> plainCases() {
  std::vector<int> out;
  for (size_t i = 0; i < collectiveCases().size(); ++i) {
    if (collectiveCases()[i].algorithm == nullptr) out.push_back(static_cast<int>(i));
  }
  return out;
}

std::string sweepName(const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
  return std::string(collectiveCases()[std::get<0>(info.param)].name) + "_" + kLayouts[std::get<1>(info.param)].name;
}

INSTANTIATE_TEST_SUITE_P(AllCollectives, StagedDeviceSweep,
                         ::testing::Combine(::testing::ValuesIn(plainCases()), ::testing::Values(0, 1)), sweepName);

}  // namespace
}  // namespace fairway::testing
