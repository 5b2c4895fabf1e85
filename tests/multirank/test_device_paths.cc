// Device buffers without a GPU: under the host-emulated device runtime
// (FAIRWAY_DEVICE_RUNTIME=host-emulated) "device" memory is host memory the
// runtime recognises and streams are threads running their work later, in
// order. The core cannot tell: it plans and runs its device paths as on a
// GPU machine, and this sweep checks every collective there against the
// reference, on one node and on two emulated nodes. The Gpu.* tests run the
// same paths on a real GPU.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <thread>
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

// A point on a stream that work behind it cannot pass until the test opens it.
class StreamGate {
 public:
  explicit StreamGate(fwStream_t stream) { emulatedDevice()->enqueue(stream, &StreamGate::hold, this); }
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  static void hold(void* self) {
    auto* gate = static_cast<StreamGate*>(self);
    std::unique_lock<std::mutex> lock(gate->mutex_);
    gate->cv_.wait_for(lock, std::chrono::seconds(60), [&] { return gate->open_; });
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

int initComm(const RankContext& ctx, fwComm_t* comm) {
  if (emulatedDevice() == nullptr) {
    reportFailure(ctx, std::string("no host-emulated device runtime: ") + dlerror());
    return 1;
  }
  if (fwCommInitRank(comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) {
    reportFailure(ctx, std::string("fwCommInitRank: ") + fwGetLastErrorMessage());
    return 1;
  }
  return 0;
}

// NCCL's stream semantics on the staged path: the call returns while the
// stream is held before it, nothing is written yet, and work enqueued on
// the stream after the call sees the result once the stream runs.
TEST(DeviceStreamOrder, CallReturnsBeforeItsWorkAndLaterWorkSeesTheResult) {
  auto outcomes = runRanks(2, [](const RankContext& ctx) {
    fwComm_t comm;
    if (initComm(ctx, &comm)) return 1;
    int failures = 0;
    constexpr size_t kCount = 100000;  // several staging slices
    setenv("FAIRWAY_STAGING_SLICE_BYTES", "65536", 1);
    GuardedBuffer send(kCount * sizeof(float), true), recv(kCount * sizeof(float), true);
    auto* in = static_cast<float*>(send.data());
    auto* out = static_cast<float*>(recv.data());
    for (size_t i = 0; i < kCount; ++i) {
      in[i] = static_cast<float>(ctx.rank + 1);
      out[i] = -1.0f;
    }
    fwStream_t stream = emulatedDevice()->createStream();
    StreamGate gate(stream);
    const auto start = std::chrono::steady_clock::now();
    RANK_CHECK(ctx, fwAllReduce(in, out, kCount, fwFloat32, fwSum, comm, stream) == fwSuccess, "fwAllReduce");
    const double callMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    RANK_CHECK(ctx, callMs < 1000, "the call waited for its stream: " + std::to_string(callMs) + " ms");
    RANK_CHECK(ctx, out[0] == -1.0f && out[kCount - 1] == -1.0f, "the result was written before the stream ran");
    // Work behind the call copies what it sees.
    struct Seen {
      const float* out;
      float first = 0, last = 0;
    } seen{out};
    emulatedDevice()->enqueue(stream, [](void* p) {
      auto* s = static_cast<Seen*>(p);
      s->first = s->out[0];
      s->last = s->out[kCount - 1];
    }, &seen);
    gate.open();
    RANK_CHECK(ctx, emulatedDevice()->synchronize(stream, 60000) == 0, "the stream did not finish");
    RANK_CHECK(ctx, seen.first == 3.0f && seen.last == 3.0f,
               "work after the call saw " + std::to_string(seen.first) + ", " + std::to_string(seen.last) + ", not 3");
    // A barrier with a stream takes the device path too: it runs once
    // every rank's stream reaches it.
    RANK_CHECK(ctx, fwBarrier(comm, stream) == fwSuccess, "fwBarrier on a stream");
    RANK_CHECK(ctx, emulatedDevice()->synchronize(stream, 60000) == 0, "the barrier did not finish");
    emulatedDevice()->destroyStream(stream);
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "fwCommDestroy");
    return failures;
  });
  for (auto& o : outcomes) {
    EXPECT_EQ(o.exitCode, 0);
    EXPECT_FALSE(o.timedOut);
  }
}

// A peer that dies while a device call is queued on the worker: the call
// has returned, so the failure shows as the communicator's asynchronous
// error, naming the rank, within the timeout and 2 s; the next call fails.
TEST(DeviceAsyncError, KilledRankIsNamedByEverySurvivor) {
  constexpr int64_t kTimeoutMs = 5000;
  auto outcomes = runRanks(3, [](const RankContext& ctx) {
    setenv("FAIRWAY_TIMEOUT_MS", std::to_string(kTimeoutMs).c_str(), 1);
    fwComm_t comm;
    if (initComm(ctx, &comm)) return 1;
    int failures = 0;
    constexpr size_t kCount = 1 << 16;
    GuardedBuffer buffer(kCount * sizeof(float), true);
    auto* data = static_cast<float*>(buffer.data());
    for (size_t i = 0; i < kCount; ++i) data[i] = 1.0f;
    // Every connection is up before rank 2 dies.
    RANK_CHECK(ctx, fwBarrier(comm, nullptr) == fwSuccess, "fwBarrier");
    if (ctx.rank == 2) raise(SIGKILL);
    fwStream_t stream = emulatedDevice()->createStream();
    const auto start = std::chrono::steady_clock::now();
    // The call fails at once only if the death was already seen; either
    // way the communicator's asynchronous error must report it.
    (void)fwAllReduce(data, data, kCount, fwFloat32, fwSum, comm, stream);
    fwResult_t async = fwSuccess;
    while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(kTimeoutMs + 2000)) {
      if (fwCommGetAsyncError(comm, &async) != fwSuccess || async != fwSuccess) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    RANK_CHECK(ctx, async != fwSuccess, "no asynchronous error " + std::to_string(ms) + " ms after the call");
    fwResult_t next = fwAllReduce(data, data, kCount, fwFloat32, fwSum, comm, stream);
    RANK_CHECK(ctx, next != fwSuccess, "the next call succeeded on a broken communicator");
    const std::string message = fwGetLastErrorMessage();
    if (message.find("rank 2") == std::string::npos) {
      reportFailure(ctx, "the error does not name rank 2: " + message);
      ++failures;
    }
    // The worker released the stream: it drains.
    RANK_CHECK(ctx, emulatedDevice()->synchronize(stream, 10000) == 0, "the stream stayed blocked");
    emulatedDevice()->destroyStream(stream);
    fwCommAbort(comm);
    return failures;
  });
  EXPECT_EQ(outcomes[2].exitCode, 128 + SIGKILL);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r;
    EXPECT_FALSE(outcomes[r].timedOut) << "rank " << r;
  }
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
