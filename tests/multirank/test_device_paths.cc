// Device buffers on the device paths, on whichever device runtime the
// process has: under the host-emulated runtime (FAIRWAY_DEVICE_RUNTIME=
// host-emulated, what ctest sets) "device" memory is host memory the
// runtime recognises and streams are threads running their work later, in
// order, so every device path runs in CI without a GPU; with
// FAIRWAY_DEVICE_RUNTIME=cuda (scripts/gpu_check.sh on a GPU machine) the
// same tests run on the GPU. The core cannot tell: it plans and runs its
// device paths as on any GPU machine, and these tests check every
// collective there against the reference, on one node and on emulated
// nodes, through both UCX paths: staged through pinned host memory, and
// direct (UCX on the device buffers, copies and reductions by the device
// runtime; on a GPU this needs a CUDA-aware UCX). Tests fill and check
// host mirrors and copy through the runtime (test_device.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <cstdlib>
#include <thread>
#include <unistd.h>
#include <string>
#include <vector>

#include "tests/multirank/collective_sweep.h"
#include "providers/staging_buffer.h"
#include "tests/multirank/test_device.h"

namespace fairway::testing {
namespace {

// fwMemAlloc hands out the runtime's device memory: the core classifies
// it as device memory, and fwMemFree refuses anything else.
TEST(DeviceMemory, MemAllocGivesDeviceMemory) {
  auto outcomes = runRanks(1, [](const RankContext& ctx) {
    int failures = 0;
    void* memory = nullptr;
    RANK_CHECK(ctx, fwMemAlloc(&memory, 4096) == fwSuccess && memory != nullptr, "fwMemAlloc");
    RANK_CHECK(ctx, testDevice() != nullptr, "no device runtime: " + whyNoTestDevice());
    if (failures) return failures;
    int owner = -1;
    RANK_CHECK(ctx, testDevice()->memoryTypeOf(memory, &owner) == MemoryType::Cuda, "not classified as device memory");
    int onTheStack = 0;
    RANK_CHECK(ctx, fwMemFree(&onTheStack) == fwInvalidArgument, "fwMemFree of a stack address");
    RANK_CHECK(ctx, std::string(fwGetLastErrorMessage()).find("not device memory") != std::string::npos,
               "the refusal says why");
    RANK_CHECK(ctx, fwMemFree(memory) == fwSuccess, "fwMemFree");
    RANK_CHECK(ctx, fwMemFree(memory) == fwInvalidArgument, "a second fwMemFree");  // no longer device memory
    return failures;
  });
  EXPECT_EQ(outcomes[0].exitCode, 0);
}

// A thread that a caller's stream waits for never allocates: CUDA may
// make the allocation wait for that very stream. Staging memory grows
// elsewhere and is refused there, saying why.
TEST(DeviceMemory, StagingGrowsOnlyWhereNoStreamWaits) {
  auto outcomes = runRanks(1, [](const RankContext& ctx) {
    int failures = 0;
    DeviceRuntime* device = testDevice();
    RANK_CHECK(ctx, device != nullptr, "no device runtime: " + whyNoTestDevice());
    if (failures) return failures;
    for (auto kind : {StagingBuffer::Kind::Device, StagingBuffer::Kind::Pinned}) {
      StagingBuffer buffer(*device, kind);
      RANK_CHECK(ctx, buffer.reserve(1024).isOk() && buffer.capacity() == 1024, "growth with no stream waiting");
      {
        StagingBuffer::GatedStreamScope gated;
        RANK_CHECK(ctx, buffer.reserve(512).isOk(), "what is already there, with a stream waiting");
        const Status refused = buffer.reserve(4096);
        RANK_CHECK(ctx, refused.code() == fwInternalError, "growth with a stream waiting was not refused");
        RANK_CHECK(ctx, refused.message().find("stream waits for") != std::string::npos,
                   "the refusal does not say why: " + refused.message());
        RANK_CHECK(ctx, buffer.capacity() == 1024, "the refused growth changed the buffer");
      }
      RANK_CHECK(ctx, buffer.reserve(4096).isOk() && buffer.capacity() == 4096, "growth once no stream waits");
    }
    return failures;
  });
  EXPECT_EQ(outcomes[0].exitCode, 0);
}

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
  destroyTestStream(stream);
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
  if (testDevice() == nullptr) {
    reportFailure(ctx, "no device runtime: " + whyNoTestDevice());
    return 1;
  }
  if (fwCommInitRank(comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) {
    reportFailure(ctx, std::string("fwCommInitRank: ") + fwGetLastErrorMessage());
    return 1;
  }
  return 0;
}

// Why a path cannot run here with `ranksPerNode` ranks on a node, or "":
// no device runtime, or NCCL on a GPU with fewer GPUs than ranks (NCCL
// refuses two ranks on one GPU, and the plan would quietly take UCX).
std::string whyPathCannotRun(int path, int ranksPerNode) {
  const DeviceProbe& probe = probeDevice();
  if (!probe.usable) return "no device runtime: " + probe.why;
  if ((path == kNcclStaged || path == kNcclDirect) && probe.memoryIsCuda && ranksPerNode > probe.devices) {
    return "NCCL needs a GPU per rank: " + std::to_string(ranksPerNode) + " ranks on a node, " +
           std::to_string(probe.devices) + " GPU(s)";
  }
  return "";
}

#define SKIP_UNLESS_PATH_RUNS(path, ranksPerNode)                                  \
  do {                                                                             \
    const std::string why_ = whyPathCannotRun(path, ranksPerNode);                 \
    if (!why_.empty()) GTEST_SKIP() << why_;                                       \
  } while (0)

// Host values into a device buffer (a GuardedBuffer's mirror, then copied).
template <typename T, typename Fill>
bool fillOnDevice(GuardedBuffer& buffer, size_t count, Fill value) {
  T* host = reinterpret_cast<T*>(buffer.host());
  for (size_t i = 0; i < count; ++i) host[i] = value(i);
  return buffer.toDevice();
}

// Each rank's INFO log of one subsystem, in a file per process, for tests
// that check what the library says it did. Made before the ranks start
// (rank 0 logs while it makes the unique id); undone, and the files
// removed, when it goes.
class RankLogs {
 public:
  explicit RankLogs(const char* subsystem) {
    char dir[] = "/tmp/fairway-logs-XXXXXX";
    if (mkdtemp(dir) != nullptr) dir_ = dir;
    setenv("FAIRWAY_DEBUG", "INFO", 1);
    setenv("FAIRWAY_DEBUG_SUBSYS", subsystem, 1);
    setenv("FAIRWAY_DEBUG_FILE", (dir_ + "/rank-%p.log").c_str(), 1);
  }
  ~RankLogs() {
    for (const char* name : {"FAIRWAY_DEBUG", "FAIRWAY_DEBUG_SUBSYS", "FAIRWAY_DEBUG_FILE"}) unsetenv(name);
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  bool made() const { return !dir_.empty(); }
  // In a rank's process: what it has logged so far.
  std::string ofThisProcess() const {
    std::ifstream log(dir_ + "/rank-" + std::to_string(getpid()) + ".log");
    return std::string((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  }

 private:
  std::string dir_;
};

// NCCL's stream semantics on the paths the worker drives: the call returns
// while the stream is held before it, nothing is written yet, and work
// enqueued on the stream after the call sees the result once the stream runs.
// That holds from a shape's second call: the first waits for its stream and
// may allocate (device_call_shapes.h), so the test runs the shape once first.
class DeviceStreamOrder : public ::testing::TestWithParam<int> {};

TEST_P(DeviceStreamOrder, CallReturnsBeforeItsWorkAndLaterWorkSeesTheResult) {
  const int path = GetParam();
  SKIP_UNLESS_PATH_RUNS(path, 2);
  auto outcomes = runRanks(2, [path](const RankContext& ctx) {
    usePath(path);
    fwComm_t comm;
    if (initComm(ctx, &comm)) return 1;
    int failures = 0;
    constexpr size_t kCount = 100000;  // several staging slices
    setenv("FAIRWAY_STAGING_SLICE_BYTES", "65536", 1);
    GuardedBuffer send(kCount * sizeof(float), true), recv(kCount * sizeof(float), true);
    RANK_CHECK(ctx, fillOnDevice<float>(send, kCount, [&](size_t) { return static_cast<float>(ctx.rank + 1); }) &&
                        fillOnDevice<float>(recv, kCount, [](size_t) { return -1.0f; }),
               "filling the device buffers");
    fwStream_t stream = createTestStream();
    RANK_CHECK(ctx, fwAllReduce(send.data(), recv.data(), kCount, fwFloat32, fwSum, comm, stream) == fwSuccess &&
                        synchronizeTestStream(stream) == 0,
               "the shape's first call");
    RANK_CHECK(ctx, fillOnDevice<float>(recv, kCount, [](size_t) { return -1.0f; }), "refilling recv");
    StreamGate gate(stream);
    RANK_CHECK(ctx, gate.holds(), "the stream could not be held back");
    const auto start = std::chrono::steady_clock::now();
    RANK_CHECK(ctx, fwAllReduce(send.data(), recv.data(), kCount, fwFloat32, fwSum, comm, stream) == fwSuccess,
               "fwAllReduce");
    const double callMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    RANK_CHECK(ctx, callMs < 1000, "the call waited for its stream: " + std::to_string(callMs) + " ms");
    // Read through the copy stream, which the gate does not hold.
    const auto* out = reinterpret_cast<const float*>(recv.host());
    RANK_CHECK(ctx, recv.fromDevice() && out[0] == -1.0f && out[kCount - 1] == -1.0f,
               "the result was written before the stream ran");
    // Work behind the call copies what it sees into pinned memory (a
    // copy into pageable memory would block this thread on the held stream).
    DeviceRuntime* device = testDevice();
    void* seen = nullptr;
    RANK_CHECK(ctx, device->allocatePinned(2 * sizeof(float), &seen).isOk(), "pinned memory");
    if (seen == nullptr) return closeRank(ctx, comm, stream, failures);
    auto* seenFloats = static_cast<float*>(seen);
    seenFloats[0] = seenFloats[1] = 0;
    const auto* result = static_cast<const float*>(recv.data());
    RANK_CHECK(ctx, device->copyAsync(seenFloats, result, sizeof(float), stream).isOk() &&
                        device->copyAsync(seenFloats + 1, result + kCount - 1, sizeof(float), stream).isOk(),
               "copies behind the call");
    gate.open();
    RANK_CHECK(ctx, synchronizeTestStream(stream) == 0, "the stream did not finish");
    RANK_CHECK(ctx, seenFloats[0] == 3.0f && seenFloats[1] == 3.0f,
               "work after the call saw " + std::to_string(seenFloats[0]) + ", " + std::to_string(seenFloats[1]) +
                   ", not 3");
    device->freePinned(seen);
    // A barrier with a stream takes the device path too: it runs once
    // every rank's stream reaches it.
    RANK_CHECK(ctx, fwBarrier(comm, stream) == fwSuccess, "fwBarrier on a stream");
    RANK_CHECK(ctx, synchronizeTestStream(stream) == 0, "the barrier did not finish");
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
  SKIP_UNLESS_PATH_RUNS(path, 2);
  auto outcomes = runRanks(2, [path](const RankContext& ctx) {
    usePath(path);
    setenv("FAIRWAY_STAGING_SLICE_BYTES", "65536", 1);
    fwComm_t comm;
    if (initComm(ctx, &comm)) return 1;
    int failures = 0;
    const int peer = 1 - ctx.rank;
    fwStream_t stream = createTestStream();
    for (size_t count : {size_t{100003}, size_t{1}, size_t{0}}) {
      GuardedBuffer out(std::max<size_t>(count, 1) * sizeof(int32_t), true);
      GuardedBuffer in(std::max<size_t>(count, 1) * sizeof(int32_t), true);
      RANK_CHECK(ctx, fillOnDevice<int32_t>(out, count, [&](size_t k) {
                   return static_cast<int32_t>(ctx.rank * 1000003 + k);
                 }) && fillOnDevice<int32_t>(in, count, [](size_t) { return -1; }),
                 "filling the device buffers");
      failures += exchange(ctx, comm, stream, out.data(), in.data(), count, fwInt32, peer, ctx.rank == 0);
      RANK_CHECK(ctx, synchronizeTestStream(stream) == 0, "the stream did not finish");
      RANK_CHECK(ctx, in.fromDevice(), "copying the message back");
      const auto* i = reinterpret_cast<const int32_t*>(in.host());
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
  SKIP_UNLESS_PATH_RUNS(path, 2);
  const RankLogs logs("TRANSPORT");
  ASSERT_TRUE(logs.made());
  auto outcomes = runRanks(4, [path, &logs](const RankContext& ctx) {
    usePath(path);
    setenv("FAIRWAY_NODE_ID", ctx.rank < 2 ? "node-a" : "node-b", 1);
    fwComm_t comm;
    if (initComm(ctx, &comm)) return 1;
    int failures = 0;
    constexpr size_t kCount = 3000;
    GuardedBuffer send(4 * kCount * sizeof(float), true), recv(4 * kCount * sizeof(float), true);
    RANK_CHECK(ctx, fillOnDevice<float>(send, 4 * kCount, [](size_t) { return 1.0f; }), "filling the input");
    fwStream_t stream = createTestStream();
    const void* in = send.data();
    void* r = recv.data();
    RANK_CHECK(ctx, fwAllReduce(in, r, kCount, fwFloat32, fwSum, comm, stream) == fwSuccess, "allreduce");
    RANK_CHECK(ctx, fwReduceScatter(in, r, kCount, fwFloat32, fwSum, comm, stream) == fwSuccess, "reducescatter");
    RANK_CHECK(ctx, fwAllGather(in, r, kCount, fwFloat32, comm, stream) == fwSuccess, "allgather");
    RANK_CHECK(ctx, fwBroadcast(in, r, kCount, fwFloat32, 0, comm, stream) == fwSuccess, "broadcast");
    RANK_CHECK(ctx, fwAllToAll(in, r, kCount, fwFloat32, comm, stream) == fwSuccess, "alltoall");
    RANK_CHECK(ctx, fwAllReduce(in, r, kCount, fwInt32, fwBxor, comm, stream) == fwSuccess, "bitwise allreduce");
    const int peer = ctx.rank ^ 2;  // on the other node
    failures += exchange(ctx, comm, stream, in, r, kCount, fwFloat32, peer, ctx.rank < 2);
    RANK_CHECK(ctx, synchronizeTestStream(stream) == 0, "the stream did not finish");
    failures = closeRank(ctx, comm, stream, failures);
    const std::string log = logs.ofThisProcess();
    int created = 0;
    for (size_t at = log.find("transport 'ucx' created"); at != std::string::npos;
         at = log.find("transport 'ucx' created", at + 1)) {
      ++created;
    }
    if (created != 2) {
      reportFailure(ctx, "UCX transports created: " + std::to_string(created) + ", not 2 (one per level)");
      ++failures;
    }
    return failures;
  });
  expectEveryRankPassed(outcomes);
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
  SKIP_UNLESS_PATH_RUNS(path, 3);
  auto outcomes = runRanks(3, [path](const RankContext& ctx) {
    setenv("FAIRWAY_TIMEOUT_MS", std::to_string(kTimeoutMs).c_str(), 1);
    usePath(path);
    fwComm_t comm;
    if (initComm(ctx, &comm)) return 1;
    int failures = 0;
    constexpr size_t kCount = 1 << 16;
    GuardedBuffer buffer(kCount * sizeof(float), true);
    RANK_CHECK(ctx, fillOnDevice<float>(buffer, kCount, [](size_t) { return 1.0f; }), "filling the buffer");
    void* data = buffer.data();
    // Every connection is up, NCCL's included (made at the first device
    // call), before rank 2 dies.
    fwStream_t stream = createTestStream();
    RANK_CHECK(ctx, fwAllReduce(data, data, kCount, fwFloat32, fwSum, comm, stream) == fwSuccess, "warm-up");
    RANK_CHECK(ctx, synchronizeTestStream(stream) == 0, "the warm-up did not finish");
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
    RANK_CHECK(ctx, synchronizeTestStream(stream) == 0, "the stream stayed blocked");
    destroyTestStream(stream);
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

// A shrink after a death keeps the device path's NCCL communicators: where
// every survivor's can shrink (the host-emulated stand-in shrinks the
// Fairway communicator underneath; NCCL 2.27 on has ncclCommShrink), the
// shrunk communicator takes them instead of making its own, says so at
// INFO, and its device allreduces give the survivors' sums. On one node
// the whole communicator's NCCL communicator shrinks; on two, two-phase's
// node communicators, each node losing a rank (3+3 to 2+2).
struct ShrinkCase {
  const char* name;
  std::vector<std::string> nodeOfRank;
  std::vector<int> victims;
  const char* algorithm;  // FAIRWAY_ALGO for the device allreduces, or null
  const char* logLine;
};
const ShrinkCase kShrinkOneNode{"one_node", {"a", "a", "a"}, {2}, nullptr, "NCCL communicator shrunk to 2 ranks"};
const ShrinkCase kShrinkTwoNodes{"two_nodes", {"a", "a", "a", "b", "b", "b"}, {2, 4}, "allreduce:twophase",
                                 "node NCCL communicator shrunk to 2 ranks"};

class DeviceShrink : public ::testing::TestWithParam<const ShrinkCase*> {};

TEST_P(DeviceShrink, NcclCommunicatorsShrinkWithTheSurvivors) {
  const ShrinkCase& c = *GetParam();
  const int ranks = static_cast<int>(c.nodeOfRank.size());
  SKIP_UNLESS_PATH_RUNS(kNcclStaged, 3);
  const RankLogs logs("COLL");
  ASSERT_TRUE(logs.made());
  auto outcomes = runRanks(ranks, [&c, &logs](const RankContext& ctx) {
    setenv("FAIRWAY_TIMEOUT_MS", "5000", 1);
    setenv("FAIRWAY_NODE_ID", c.nodeOfRank[ctx.rank].c_str(), 1);
    if (c.algorithm != nullptr) setenv("FAIRWAY_ALGO", c.algorithm, 1);
    usePath(kNcclStaged);
    fwComm_t comm;
    if (initComm(ctx, &comm)) return 1;
    int failures = 0;
    constexpr size_t kCount = 4096;
    GuardedBuffer buffer(kCount * sizeof(float), true);
    fwStream_t stream = createTestStream();
    RANK_CHECK(ctx, fillOnDevice<float>(buffer, kCount, [](size_t) { return 1.0f; }), "filling the buffer");
    RANK_CHECK(ctx, fwAllReduce(buffer.data(), buffer.data(), kCount, fwFloat32, fwSum, comm, stream) == fwSuccess &&
                        synchronizeTestStream(stream) == 0,
               "the device allreduce that makes the NCCL communicators");
    RANK_CHECK(ctx, fwBarrier(comm, nullptr) == fwSuccess, "fwBarrier");
    if (std::find(c.victims.begin(), c.victims.end(), ctx.rank) != c.victims.end()) raise(SIGKILL);
    // The survivors find the deaths (a host call waits for the victims), then shrink.
    float x = 1, y = 0;
    RANK_CHECK(ctx, fwAllReduce(&x, &y, 1, fwFloat32, fwSum, comm, nullptr) != fwSuccess, "a call with ranks dead");
    fwComm_t shrunk = nullptr;
    for (int attempt = 0; attempt < 3 && shrunk == nullptr; ++attempt) {
      (void)fwCommShrink(comm, nullptr, 0, FAIRWAY_SHRINK_ABORT, &shrunk);
    }
    RANK_CHECK(ctx, shrunk != nullptr, "fwCommShrink");
    if (shrunk == nullptr) return failures;
    int size = 0, rank = -1;
    fwCommCount(shrunk, &size);
    fwCommUserRank(shrunk, &rank);
    for (int k = 1; k <= 20 && failures == 0; ++k) {
      RANK_CHECK(ctx, fillOnDevice<float>(buffer, kCount, [&](size_t i) { return static_cast<float>(rank + k + i % 3); }),
                 "refilling the buffer");
      RANK_CHECK(ctx, fwAllReduce(buffer.data(), buffer.data(), kCount, fwFloat32, fwSum, shrunk, stream) == fwSuccess &&
                          synchronizeTestStream(stream) == 0,
                 "device allreduce " + std::to_string(k) + " on the shrunk communicator");
      RANK_CHECK(ctx, buffer.fromDevice(), "reading the result");
      const float* got = reinterpret_cast<const float*>(buffer.host());
      for (size_t i = 0; i < kCount && failures == 0; ++i) {
        const float want = static_cast<float>(size * (size - 1) / 2 + size * (k + static_cast<int>(i % 3)));
        RANK_CHECK(ctx, got[i] == want, "element " + std::to_string(i) + " of call " + std::to_string(k) + ": " +
                                            std::to_string(got[i]) + ", want " + std::to_string(want));
      }
    }
    RANK_CHECK(ctx, logs.ofThisProcess().find(c.logLine) != std::string::npos, std::string("the log does not say \"") + c.logLine + "\"");
    destroyTestStream(stream);
    RANK_CHECK(ctx, fwCommDestroy(shrunk) == fwSuccess, "fwCommDestroy of the shrunk communicator");
    fwCommAbort(comm);
    return failures;
  });
  for (int r = 0; r < ranks; ++r) {
    const bool victim = std::find(c.victims.begin(), c.victims.end(), r) != c.victims.end();
    EXPECT_EQ(outcomes[r].exitCode, victim ? 128 + SIGKILL : 0) << "rank " << r;
    EXPECT_FALSE(outcomes[r].timedOut) << "rank " << r;
  }
}
INSTANTIATE_TEST_SUITE_P(Layouts, DeviceShrink, ::testing::Values(&kShrinkOneNode, &kShrinkTwoNodes),
                         [](const ::testing::TestParamInfo<const ShrinkCase*>& info) { return info.param->name; });

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
// A rank per node: what NCCL runs on one GPU (a communicator of one rank).
const Layout kOneByOne{"1x1", {"a"}};
const Layout kThreeByOne{"3x1", {"a", "b", "c"}};

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
// (consecutive and permuted nodes, 4x2) or direct; the layouts of one rank
// per node are those NCCL can run on a single GPU (the others skip there).
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
    if (twoPhase || name == "broadcast" || name == "reduce") {
      for (const Layout* layout : {&kOneByFour, &kOneByOne}) out.push_back({c, layout, kNcclStaged});
    }
    if (!twoPhase) continue;
    for (const Layout* layout : {&kTwoByTwo, &kThreeByTwoPermuted, &kFourByTwo, &kThreeByOne}) {
      out.push_back({c, layout, kNcclStaged});
    }
    for (const Layout* layout : {&kTwoByTwo, &kThreeByOne}) out.push_back({c, layout, kNcclDirect});
  }
  return out;
}

// Compressed allreduce and reduce-scatter on device buffers: the same
// algorithm as on host buffers, its steps on the device runtime (the CUDA
// plugin's kernels on a GPU, the host's kernels on a stream under the
// emulation: the same bits either way, so the flat results are the host
// run's, error-feedback residual included), with the encoded pieces on the
// device (direct) or copied through pinned memory (staged); and across
// nodes with NCCL (or the emulation's stand-in) as the node phase, the rail
// direct or staged: two nodes of two ranks, or on a GPU, where NCCL needs a
// GPU per rank, four nodes of one.
class DeviceCompression : public ::testing::TestWithParam<int> {};

TEST_P(DeviceCompression, MatchesTheHostRun) {
  const int path = GetParam();
  const bool acrossNodes = path == kNcclDirect || path == kNcclStaged;
  const bool nodePerRank = acrossNodes && probeDevice().memoryIsCuda;
  SKIP_UNLESS_PATH_RUNS(path, nodePerRank ? 1 : 2);
  auto outcomes = runRanks(4, [path, acrossNodes, nodePerRank](const RankContext& ctx) {
    int failures = 0;
    usePath(path);
    if (acrossNodes) {
      setenv("FAIRWAY_NODE_ID", (nodePerRank ? "node-" + std::to_string(ctx.rank) : ctx.rank < 2 ? "a" : "b").c_str(),
             1);
    }
    setenv("FAIRWAY_ALGO", acrossNodes ? "allreduce:compressed_twophase;reducescatter:compressed_twophase"
                                       : "allreduce:compressed_flat;reducescatter:compressed_flat", 1);
    fwComm_t comm = nullptr;
    if (initComm(ctx, &comm) != 0) return 1;
    fwStream_t stream = createTestStream();
    const size_t count = 50000;  // allreduce count; reduce-scatter input per rank
    std::vector<float> input(count), hostOut(count), hostResidual(count, 0.f);
    for (size_t i = 0; i < count; ++i) input[i] = std::sin(0.001f * static_cast<float>(i * (ctx.rank + 3)));
    GuardedBuffer in(count * 4, true), out(count * 4, true), residual(count * 4, true);
    RANK_CHECK(ctx, in.data() && out.data() && residual.data(), "fwMemAlloc");
    if (failures) return closeRank(ctx, comm, stream, failures);
    for (bool allreduce : {true, false}) {
      const size_t outCount = allreduce ? count : count / 4;
      std::memcpy(in.host(), input.data(), count * 4);
      std::memset(residual.host(), 0, count * 4);
      RANK_CHECK(ctx, in.toDevice() && residual.toDevice(), "copying the input to the device");
      std::fill(hostResidual.begin(), hostResidual.end(), 0.f);
      fwCompression_t onDevice = FW_COMPRESSION_INITIALIZER, onHost = FW_COMPRESSION_INITIALIZER;
      onDevice.kind = onHost.kind = fwCompressInt8;
      onDevice.residual = static_cast<float*>(residual.data());
      onHost.residual = hostResidual.data();
      auto call = [&](const void* send, void* recv, const fwCompression_t* c, fwStream_t s) {
        return allreduce ? fwAllReduceCompressed(send, recv, count, fwFloat32, fwSum, c, comm, s)
                         : fwReduceScatterCompressed(send, recv, count / 4, fwFloat32, fwAvg, c, comm, s);
      };
      const fwResult_t device = call(in.data(), out.data(), &onDevice, stream);
      RANK_CHECK(ctx, device == fwSuccess, "compressed call on device buffers");
      RANK_CHECK(ctx, synchronizeTestStream(stream) == 0, "stream");
      RANK_CHECK(ctx, out.fromDevice() && residual.fromDevice(), "copying the result from the device");
      RANK_CHECK(ctx, call(input.data(), hostOut.data(), &onHost, nullptr) == fwSuccess, "the same on host buffers");
      const bool sameBits = std::memcmp(out.host(), hostOut.data(), outCount * 4) == 0 &&
                            std::memcmp(residual.host(), hostResidual.data(), count * 4) == 0;
      if (!acrossNodes) RANK_CHECK(ctx, sameBits, "device and host results or residuals differ");
      // Against the exact result (two-phase's node phase may sum in another order).
      double err = 0, norm = 0;
      const auto* got = reinterpret_cast<const float*>(out.host());
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
    return closeRank(ctx, comm, stream, failures);
  });
  expectEveryRankPassed(outcomes);
}

INSTANTIATE_TEST_SUITE_P(Paths, DeviceCompression, ::testing::Values(kDirect, kStaged, kNcclDirect, kNcclStaged),
                         pathName);

class DeviceSweep : public ::testing::TestWithParam<int> {};

int ranksPerNode(const Layout& layout) {
  int most = 0;
  for (const std::string& node : layout.nodeOfRank) {
    most = std::max(most, static_cast<int>(std::count(layout.nodeOfRank.begin(), layout.nodeOfRank.end(), node)));
  }
  return most;
}

TEST_P(DeviceSweep, MatchesReference) {
  const DeviceCase d = deviceCases()[GetParam()];
  const CollectiveCase& c = d.collective;
  const int path = d.path;
  SKIP_UNLESS_PATH_RUNS(path, ranksPerNode(*d.layout));
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
    if (testDevice() == nullptr) {
      reportFailure(ctx, "no device runtime: " + whyNoTestDevice());
      return 1;
    }
    SweepOptions options;
    options.nodeOfRank = d.layout->nodeOfRank;
    options.deviceMemory = true;
    options.stream = createTestStream();
    options.synchronize = synchronizeTestStream;
    int failures = sweepCollective(ctx, c, options);
    destroyTestStream(options.stream);
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
