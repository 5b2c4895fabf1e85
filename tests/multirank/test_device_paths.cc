// Device buffers without a GPU: under the host-emulated device runtime
// (FAIRWAY_DEVICE_RUNTIME=host-emulated) "device" memory is host memory the
// runtime recognises and streams are threads running their work later, in
// order. The core cannot tell: it plans and runs its device paths as on a
// GPU machine, and these tests check every collective there against the
// reference, on one node and on emulated nodes, through both UCX paths:
// staged through pinned host memory, and direct (UCX on the device
// buffers, copies and reductions by the device runtime), which any UCX can
// take here since this device memory is host memory. The Gpu.* tests run
// the same paths on a real GPU.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <unistd.h>
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

// The device paths: UCX at every level, staged through pinned host memory
// or on the device buffers directly; or the runtime's stand-in for NCCL
// inside nodes (flat on one node, two-phase across nodes) with the rail
// staged or direct.
enum Path { kStaged, kDirect, kNcclStaged, kNcclDirect };
const char* const kPaths[] = {"staged", "direct", "nccl_staged", "nccl_direct"};

std::string pathName(const ::testing::TestParamInfo<int>& info) { return kPaths[info.param]; }

// In a rank's process, before its communicator is created.
void usePath(int path) {
  setenv("FAIRWAY_UCX_DEVICE_MEMORY", path == kStaged || path == kNcclStaged ? "staged" : "direct", 1);
  if (path == kStaged || path == kDirect) {
    setenv("FAIRWAY_TRANSPORT", "ucx", 1);
  } else {
    unsetenv("FAIRWAY_TRANSPORT");
  }
}

void expectEveryRankPassed(const std::vector<RankOutcome>& outcomes) {
  for (size_t r = 0; r < outcomes.size(); ++r) {
    EXPECT_EQ(outcomes[r].exitCode, 0) << "rank " << r << " failed";
    EXPECT_FALSE(outcomes[r].timedOut) << "rank " << r << " hung";
  }
}

// The end of a rank's test body: its stream and communicator go.
int closeRank(const RankContext& ctx, fwComm_t comm, fwStream_t stream, int failures) {
  emulatedDevice()->destroyStream(stream);
  RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "fwCommDestroy");
  return failures;
}

// Sends `out` to peer and receives `in` from it, on the stream; sendsFirst
// on one side only, since a device message blocks like NCCL's.
int exchange(const RankContext& ctx, fwComm_t comm, fwStream_t stream, const void* out, void* in, size_t count,
             fwDataType_t type, int peer, bool sendsFirst) {
  int failures = 0;
  for (int turn = 0; turn < 2; ++turn) {
    const bool sending = (turn == 0) == sendsFirst;
    fwResult_t r = sending ? fwSend(out, count, type, peer, comm, stream) : fwRecv(in, count, type, peer, comm, stream);
    RANK_CHECK(ctx, r == fwSuccess, sending ? "fwSend" : "fwRecv");
  }
  return failures;
}

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

// NCCL's stream semantics on the paths the worker drives: the call returns
// while the stream is held before it, nothing is written yet, and work
// enqueued on the stream after the call sees the result once the stream runs.
class DeviceStreamOrder : public ::testing::TestWithParam<int> {};

TEST_P(DeviceStreamOrder, CallReturnsBeforeItsWorkAndLaterWorkSeesTheResult) {
  const int path = GetParam();
  auto outcomes = runRanks(2, [path](const RankContext& ctx) {
    usePath(path);
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
    return closeRank(ctx, comm, stream, failures);
  });
  expectEveryRankPassed(outcomes);
}
INSTANTIATE_TEST_SUITE_P(Paths, DeviceStreamOrder, ::testing::Values(kStaged, kDirect, kNcclStaged), pathName);

// Point-to-point on device buffers: messages of several staging slices, of
// one element and empty, each way, ordered on the stream like collectives.
class DeviceSendRecv : public ::testing::TestWithParam<int> {};

TEST_P(DeviceSendRecv, MessagesArriveWhole) {
  const int path = GetParam();
  auto outcomes = runRanks(2, [path](const RankContext& ctx) {
    usePath(path);
    setenv("FAIRWAY_STAGING_SLICE_BYTES", "65536", 1);
    fwComm_t comm;
    if (initComm(ctx, &comm)) return 1;
    int failures = 0;
    const int peer = 1 - ctx.rank;
    fwStream_t stream = emulatedDevice()->createStream();
    for (size_t count : {size_t{100003}, size_t{1}, size_t{0}}) {
      GuardedBuffer out(std::max<size_t>(count, 1) * sizeof(int32_t), true);
      GuardedBuffer in(std::max<size_t>(count, 1) * sizeof(int32_t), true);
      auto* o = static_cast<int32_t*>(out.data());
      auto* i = static_cast<int32_t*>(in.data());
      for (size_t k = 0; k < count; ++k) {
        o[k] = static_cast<int32_t>(ctx.rank * 1000003 + k);
        i[k] = -1;
      }
      failures += exchange(ctx, comm, stream, o, i, count, fwInt32, peer, ctx.rank == 0);
      RANK_CHECK(ctx, emulatedDevice()->synchronize(stream, 60000) == 0, "the stream did not finish");
      for (size_t k = 0; k < count; ++k) {
        if (i[k] != static_cast<int32_t>(peer * 1000003 + k)) {
          reportFailure(ctx, "count " + std::to_string(count) + ": element " + std::to_string(k) + " is " +
                                 std::to_string(i[k]));
          ++failures;
          break;
        }
      }
      RANK_CHECK(ctx, in.guardsIntact(), "fwRecv wrote outside its buffer");
    }
    return closeRank(ctx, comm, stream, failures);
  });
  expectEveryRankPassed(outcomes);
}
INSTANTIATE_TEST_SUITE_P(Paths, DeviceSendRecv, ::testing::Values(kStaged, kDirect, kNcclStaged), pathName);

// One UCX worker per level per communicator, whichever device paths its
// collectives take (two-phase included: it runs over the node and rail
// groups of the one communicator, no sub-communicator of its own). Counted
// from the INFO line each transport's creation logs.
class DeviceTransports : public ::testing::TestWithParam<int> {};

TEST_P(DeviceTransports, OnePerLevelPerCommunicator) {
  const int path = GetParam();
  char dir[] = "/tmp/fairway-transports-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string logs = dir;
  // Set before the ranks start: rank 0 logs (making the unique id) before its body runs.
  setenv("FAIRWAY_DEBUG", "INFO", 1);
  setenv("FAIRWAY_DEBUG_SUBSYS", "TRANSPORT", 1);
  setenv("FAIRWAY_DEBUG_FILE", (logs + "/rank-%p.log").c_str(), 1);
  auto outcomes = runRanks(4, [path, logs](const RankContext& ctx) {
    usePath(path);
    setenv("FAIRWAY_NODE_ID", ctx.rank < 2 ? "node-a" : "node-b", 1);
    const std::string log = logs + "/rank-" + std::to_string(getpid()) + ".log";
    fwComm_t comm;
    if (initComm(ctx, &comm)) return 1;
    int failures = 0;
    constexpr size_t kCount = 3000;
    GuardedBuffer send(4 * kCount * sizeof(float), true), recv(4 * kCount * sizeof(float), true);
    auto* in = static_cast<float*>(send.data());
    for (size_t i = 0; i < 4 * kCount; ++i) in[i] = 1.0f;
    fwStream_t stream = emulatedDevice()->createStream();
    void* r = recv.data();
    RANK_CHECK(ctx, fwAllReduce(in, r, kCount, fwFloat32, fwSum, comm, stream) == fwSuccess, "allreduce");
    RANK_CHECK(ctx, fwReduceScatter(in, r, kCount, fwFloat32, fwSum, comm, stream) == fwSuccess, "reducescatter");
    RANK_CHECK(ctx, fwAllGather(in, r, kCount, fwFloat32, comm, stream) == fwSuccess, "allgather");
    RANK_CHECK(ctx, fwBroadcast(in, r, kCount, fwFloat32, 0, comm, stream) == fwSuccess, "broadcast");
    RANK_CHECK(ctx, fwAllToAll(in, r, kCount, fwFloat32, comm, stream) == fwSuccess, "alltoall");
    RANK_CHECK(ctx, fwAllReduce(in, r, kCount, fwInt32, fwBxor, comm, stream) == fwSuccess, "bitwise allreduce");
    const int peer = ctx.rank ^ 2;  // on the other node
    failures += exchange(ctx, comm, stream, in, r, kCount, fwFloat32, peer, ctx.rank < 2);
    RANK_CHECK(ctx, emulatedDevice()->synchronize(stream, 60000) == 0, "the stream did not finish");
    failures = closeRank(ctx, comm, stream, failures);
    std::FILE* f = std::fopen(log.c_str(), "r");
    int created = 0;
    char line[1024];
    while (f != nullptr && std::fgets(line, sizeof(line), f) != nullptr) {
      if (std::strstr(line, "transport 'ucx' created") != nullptr) ++created;
    }
    if (f != nullptr) std::fclose(f);
    if (created != 2) {
      reportFailure(ctx, "UCX transports created: " + std::to_string(created) + ", not 2 (one per level)");
      ++failures;
    }
    return failures;
  });
  for (const char* name : {"FAIRWAY_DEBUG", "FAIRWAY_DEBUG_SUBSYS", "FAIRWAY_DEBUG_FILE"}) unsetenv(name);
  expectEveryRankPassed(outcomes);
  std::filesystem::remove_all(logs);
}
// (Not the NCCL paths here: the emulated runtime's stand-in for NCCL is a
// Fairway communicator of its own per node, with its own transports, where
// NCCL has its own resources.)
INSTANTIATE_TEST_SUITE_P(Paths, DeviceTransports, ::testing::Values(kStaged, kDirect), pathName);

// A peer that dies while a device call is queued on the worker: the call
// has returned, so the failure shows as the communicator's asynchronous
// error, naming the rank, within the timeout and 2 s; the next call fails.
class DeviceAsyncError : public ::testing::TestWithParam<int> {};

TEST_P(DeviceAsyncError, KilledRankIsNamedByEverySurvivor) {
  constexpr int64_t kTimeoutMs = 5000;
  const int path = GetParam();
  auto outcomes = runRanks(3, [path](const RankContext& ctx) {
    setenv("FAIRWAY_TIMEOUT_MS", std::to_string(kTimeoutMs).c_str(), 1);
    usePath(path);
    fwComm_t comm;
    if (initComm(ctx, &comm)) return 1;
    int failures = 0;
    constexpr size_t kCount = 1 << 16;
    GuardedBuffer buffer(kCount * sizeof(float), true);
    auto* data = static_cast<float*>(buffer.data());
    for (size_t i = 0; i < kCount; ++i) data[i] = 1.0f;
    // Every connection is up, NCCL's included (made at the first device
    // call), before rank 2 dies.
    fwStream_t stream = emulatedDevice()->createStream();
    RANK_CHECK(ctx, fwAllReduce(data, data, kCount, fwFloat32, fwSum, comm, stream) == fwSuccess, "warm-up");
    RANK_CHECK(ctx, emulatedDevice()->synchronize(stream, 60000) == 0, "the warm-up did not finish");
    RANK_CHECK(ctx, fwBarrier(comm, nullptr) == fwSuccess, "fwBarrier");
    if (ctx.rank == 2) raise(SIGKILL);
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
INSTANTIATE_TEST_SUITE_P(Paths, DeviceAsyncError, ::testing::Values(kStaged, kDirect, kNcclStaged), pathName);

struct Layout {
  const char* name;
  std::vector<std::string> nodeOfRank;
};
const Layout kOneByFour{"1x4", {"a", "a", "a", "a"}};
const Layout kTwoByTwo{"2x2", {"a", "a", "b", "b"}};
const Layout kTwoByFour{"2x4", {"a", "a", "a", "a", "b", "b", "b", "b"}};
const Layout kFourByTwo{"4x2", {"a", "a", "b", "b", "c", "c", "d", "d"}};
// Nodes of different sizes, a node's ranks not consecutive.
const Layout kThreePlusTwo{"3p2", {"a", "b", "a", "b", "a"}};
// Uniform, a node's ranks not consecutive (two-phase packs its blocks).
const Layout kThreeByTwoPermuted{"3x2p", {"c", "a", "b", "b", "a", "c"}};

struct DeviceCase {
  CollectiveCase collective;
  const Layout* layout;
  int path;  // index into kPaths
};

// Staged: the collectives themselves, on one node and on two (2x2, 2x4).
// Direct: every host algorithm runs on device memory there, so the forced
// algorithms too (on one node), the collectives on 1x4, 2x2, 3+2 and 4x2,
// and two-phase forced on uniform layouts (with small slices, so its
// pipeline runs several). NCCL inside nodes: what it runs flat on one
// node, and two-phase across uniform nodes with the rail staged
// (consecutive and permuted nodes, 4x2) or direct.
std::vector<DeviceCase> deviceCases() {
  std::vector<DeviceCase> out;
  for (const CollectiveCase& c : collectiveCases()) {
    if (c.algorithm != nullptr) continue;
    for (const Layout* layout : {&kOneByFour, &kTwoByTwo, &kTwoByFour}) out.push_back({c, layout, kStaged});
  }
  for (const CollectiveCase& c : collectiveCases()) {
    if (c.algorithm != nullptr) {
      out.push_back({c, &kOneByFour, kDirect});  // a flat algorithm runs alike on any layout
      continue;
    }
    for (const Layout* layout : {&kOneByFour, &kTwoByTwo, &kThreePlusTwo, &kFourByTwo}) {
      out.push_back({c, layout, kDirect});
    }
  }
  static const struct { const char* base; const char* name; const char* algorithm; } kTwoPhase[] = {
      {"allreduce", "allreduce_twophase", "allreduce:twophase"},
      {"reducescatter", "reducescatter_twophase", "reducescatter:twophase"},
      {"allgather", "allgather_twophase", "allgather:twophase"},
  };
  for (const auto& forced : kTwoPhase) {
    for (const CollectiveCase& c : collectiveCases()) {
      if (c.algorithm != nullptr || std::string(c.name) != forced.base) continue;
      CollectiveCase copy = c;
      copy.name = forced.name;
      copy.algorithm = forced.algorithm;
      for (const Layout* layout : {&kTwoByTwo, &kThreeByTwoPermuted}) out.push_back({copy, layout, kDirect});
    }
  }
  for (const CollectiveCase& c : collectiveCases()) {
    if (c.algorithm != nullptr) continue;
    const std::string name = c.name;
    const bool twoPhase = name == "allreduce" || name == "reducescatter" || name == "allgather";
    if (twoPhase || name == "broadcast" || name == "reduce") out.push_back({c, &kOneByFour, kNcclStaged});
    if (!twoPhase) continue;
    for (const Layout* layout : {&kTwoByTwo, &kThreeByTwoPermuted, &kFourByTwo}) {
      out.push_back({c, layout, kNcclStaged});
    }
    out.push_back({c, &kTwoByTwo, kNcclDirect});
  }
  return out;
}

// Compressed allreduce and reduce-scatter on device buffers: the same
// algorithm as on host buffers, its steps on the device runtime (here the
// host's kernels on a stream, so the flat results are the host run's bits,
// error-feedback residual included), with the encoded pieces on the device
// (direct) or copied through pinned memory (staged); and across two nodes
// with the stand-in for NCCL as the node phase, the rail direct or staged.
class DeviceCompression : public ::testing::TestWithParam<int> {};

TEST_P(DeviceCompression, MatchesTheHostRun) {
  const int path = GetParam();
  auto outcomes = runRanks(4, [path](const RankContext& ctx) {
    int failures = 0;
    usePath(path);
    const bool twoNodes = path == kNcclDirect || path == kNcclStaged;
    if (twoNodes) setenv("FAIRWAY_NODE_ID", ctx.rank < 2 ? "a" : "b", 1);
    setenv("FAIRWAY_ALGO", twoNodes ? "allreduce:compressed_twophase;reducescatter:compressed_twophase"
                                    : "allreduce:compressed_flat;reducescatter:compressed_flat", 1);
    fwComm_t comm = nullptr;
    if (initComm(ctx, &comm) != 0) return 1;
    fwStream_t stream = emulatedDevice()->createStream();
    const size_t count = 50000;  // allreduce count; reduce-scatter input per rank
    std::vector<float> input(count), hostOut(count), hostResidual(count, 0.f);
    for (size_t i = 0; i < count; ++i) input[i] = std::sin(0.001f * static_cast<float>(i * (ctx.rank + 3)));
    void *in = nullptr, *out = nullptr, *residual = nullptr;
    RANK_CHECK(ctx, fwMemAlloc(&in, count * 4) == fwSuccess && fwMemAlloc(&out, count * 4) == fwSuccess &&
                        fwMemAlloc(&residual, count * 4) == fwSuccess, "fwMemAlloc");
    if (failures) return closeRank(ctx, comm, stream, failures);
    for (bool allreduce : {true, false}) {
      const size_t outCount = allreduce ? count : count / 4;
      std::memcpy(in, input.data(), count * 4);
      std::memset(residual, 0, count * 4);
      std::fill(hostResidual.begin(), hostResidual.end(), 0.f);
      fwCompression_t onDevice = FW_COMPRESSION_INITIALIZER, onHost = FW_COMPRESSION_INITIALIZER;
      onDevice.kind = onHost.kind = fwCompressInt8;
      onDevice.residual = static_cast<float*>(residual);
      onHost.residual = hostResidual.data();
      auto call = [&](const void* send, void* recv, const fwCompression_t* c, fwStream_t s) {
        return allreduce ? fwAllReduceCompressed(send, recv, count, fwFloat32, fwSum, c, comm, s)
                         : fwReduceScatterCompressed(send, recv, count / 4, fwFloat32, fwAvg, c, comm, s);
      };
      const fwResult_t device = call(in, out, &onDevice, stream);
      RANK_CHECK(ctx, device == fwSuccess, "compressed call on device buffers");
      RANK_CHECK(ctx, synchronizeStream(stream) == 0, "stream");
      RANK_CHECK(ctx, call(input.data(), hostOut.data(), &onHost, nullptr) == fwSuccess, "the same on host buffers");
      const bool sameBits = std::memcmp(out, hostOut.data(), outCount * 4) == 0 &&
                            std::memcmp(residual, hostResidual.data(), count * 4) == 0;
      if (!twoNodes) RANK_CHECK(ctx, sameBits, "device and host results or residuals differ");
      // Against the exact result (two-phase's node phase may sum in another order).
      double err = 0, norm = 0;
      const float* got = static_cast<const float*>(out);
      for (size_t i = 0; i < outCount; ++i) {
        double exact = 0;
        const size_t at = allreduce ? i : ctx.rank * outCount + i;
        for (int r = 0; r < ctx.nranks; ++r) exact += std::sin(0.001f * static_cast<float>(at * (r + 3)));
        if (!allreduce) exact /= ctx.nranks;
        err += (got[i] - exact) * (got[i] - exact);
        norm += exact * exact;
      }
      RANK_CHECK(ctx, std::sqrt(err / norm) < 0.015, "error " + std::to_string(std::sqrt(err / norm)));
    }
    fwMemFree(in);
    fwMemFree(out);
    fwMemFree(residual);
    return closeRank(ctx, comm, stream, failures);
  });
  expectEveryRankPassed(outcomes);
}

INSTANTIATE_TEST_SUITE_P(Paths, DeviceCompression, ::testing::Values(kDirect, kStaged, kNcclDirect, kNcclStaged),
                         pathName);

class DeviceSweep : public ::testing::TestWithParam<int> {};

TEST_P(DeviceSweep, MatchesReference) {
  const DeviceCase d = deviceCases()[GetParam()];
  const CollectiveCase& c = d.collective;
  const int path = d.path;
  const bool twoPhase = c.algorithm != nullptr && std::string(c.algorithm).find("twophase") != std::string::npos;
  const int nranks = static_cast<int>(d.layout->nodeOfRank.size());
  auto outcomes = runRanks(nranks, [&](const RankContext& ctx) {
    // Small slices, so a staged call pipelines several of them.
    setenv("FAIRWAY_STAGING_SLICE_BYTES", "65536", 1);
    usePath(path);
    if (twoPhase) {
      setenv("FAIRWAY_SLICE_BYTES", "262144", 1);
      setenv("FAIRWAY_MIN_SHARD_BYTES", "4096", 1);
    }
    if (emulatedDevice() == nullptr) {
      reportFailure(ctx, std::string("no host-emulated device runtime: ") + dlerror());
      return 1;
    }
    SweepOptions options;
    options.nodeOfRank = d.layout->nodeOfRank;
    options.deviceMemory = true;
    options.stream = emulatedDevice()->createStream();
    options.synchronize = synchronizeStream;
    int failures = sweepCollective(ctx, c, options);
    emulatedDevice()->destroyStream(options.stream);
    return failures;
  });
  for (int r = 0; r < nranks; ++r) {
    EXPECT_EQ(outcomes[r].exitCode, 0) << c.name << " on " << d.layout->name << " " << kPaths[path] << ": rank " << r
                                       << " failed";
    EXPECT_FALSE(outcomes[r].timedOut) << "rank " << r << " hung";
  }
}

std::string sweepName(const ::testing::TestParamInfo<int>& info) {
  const DeviceCase d = deviceCases()[info.param];
  return std::string(d.collective.name) + "_" + d.layout->name + "_" + kPaths[d.path];
}

INSTANTIATE_TEST_SUITE_P(AllCollectives, DeviceSweep, ::testing::Range(0, static_cast<int>(deviceCases().size())),
                         sweepName);

}  // namespace
}  // namespace fairway::testing
