// Host memory from fwHostMemAlloc, which the node's peers map: the
// allocator's own contract, and every collective of the node's segment on
// such buffers, with every rank's buffers mapped (the peers' copies run as
// plain loads and stores, and past the single-copy windows the ranks agree
// to write into each other's outputs) and with only some ranks' mapped
// (every path falls back as for any buffer). Results are compared with
// what each collective must give, and nothing around a buffer is written.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tests/multirank/rank_harness.h"

namespace fairway::testing {
namespace {

// Mappings of other processes' fwHostMemAlloc memory in this process: the
// memfds in /proc/self/maps that this process did not allocate itself.
int mappedFiles() {
  std::ifstream maps("/proc/self/maps");
  int files = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("memfd:fairway-host-memory") != std::string::npos) ++files;
  }
  return files;
}

TEST(MappableMemory, AllocatesZeroedPagesAndFreesOnlyWhatItAllocated) {
  void* p = nullptr;
  ASSERT_EQ(fwHostMemAlloc(&p, 10000), fwSuccess) << fwGetLastErrorMessage();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)), 0u);
  const auto* bytes = static_cast<const unsigned char*>(p);
  bool zero = true;
  for (size_t i = 0; i < 10000; ++i) zero = zero && bytes[i] == 0;
  EXPECT_TRUE(zero);
  std::memset(p, 0x7F, 10000);  // usable as any memory

  EXPECT_EQ(fwHostMemFree(static_cast<char*>(p) + 64), fwInvalidArgument);  // not its start
  EXPECT_NE(std::string(fwGetLastErrorMessage()).find("fwHostMemAlloc"), std::string::npos);
  int onStack = 0;
  EXPECT_EQ(fwHostMemFree(&onStack), fwInvalidArgument);
  EXPECT_EQ(static_cast<unsigned char*>(p)[9999], 0x7F);  // a refused free changed nothing
  EXPECT_EQ(fwHostMemFree(p), fwSuccess);
  EXPECT_EQ(fwHostMemFree(p), fwInvalidArgument);  // freed already
  EXPECT_EQ(fwHostMemFree(nullptr), fwSuccess);

  EXPECT_EQ(fwHostMemAlloc(nullptr, 64), fwInvalidPointer);
  void* q = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(fwHostMemAlloc(&q, 0), fwInvalidArgument);
  EXPECT_EQ(q, nullptr);
  EXPECT_NE(std::string(fwGetLastErrorMessage()).find("size is 0"), std::string::npos);
  EXPECT_EQ(fwHostMemAlloc(&q, SIZE_MAX), fwInvalidArgument);
  EXPECT_EQ(q, nullptr);
}

// A buffer of `bytes` at `skew` bytes into a mapped allocation (or a
// malloc'd one), with guard bytes of 0xEE up to the allocation's ends.
class Buffer {
 public:
  Buffer(size_t bytes, size_t skew, bool mapped) : bytes_(bytes), skew_(skew), mapped_(mapped) {
    const size_t total = bytes + skew + 64;
    if (mapped) {
      if (fwHostMemAlloc(reinterpret_cast<void**>(&base_), total) != fwSuccess) base_ = nullptr;
    } else {
      base_ = static_cast<char*>(std::malloc(total));
    }
    if (base_ != nullptr) std::memset(base_, 0xEE, total);
  }
  ~Buffer() {
    if (mapped_) {
      (void)fwHostMemFree(base_);
    } else {
      std::free(base_);
    }
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  char* data() const { return base_ + skew_; }
  bool guardsIntact() const {
    for (size_t i = 0; i < skew_; ++i) if (static_cast<unsigned char>(base_[i]) != 0xEE) return false;
    for (size_t i = 0; i < 64; ++i) if (static_cast<unsigned char>(base_[skew_ + bytes_ + i]) != 0xEE) return false;
    return true;
  }
  bool ok() const { return base_ != nullptr; }

 private:
  size_t bytes_, skew_;
  bool mapped_;
  char* base_ = nullptr;
};

int32_t valueOf(int rank, size_t i) { return static_cast<int32_t>((rank + 1) * 1000 + i % 7919); }

// Every collective of the segment on ranks whose buffers are mapped
// (mapped(rank)), int32 at skew bytes into their allocations (a whole
// number of elements, or an odd one for the all-to-all of bytes), counts
// that do not divide by the ranks, out of place and in place.
int collectivesOn(const RankContext& ctx, fwComm_t comm, bool mapped, size_t count, size_t skew) {
  int failures = 0;
  const int n = ctx.nranks;
  const int r = ctx.rank;
  for (bool inPlace : {false, true}) {
    {  // allreduce: sum
      Buffer send(count * 4, skew, mapped), recv(count * 4, skew, mapped);
      RANK_CHECK(ctx, send.ok() && recv.ok(), "allocation");
      if (!send.ok() || !recv.ok()) return failures;
      auto* in = reinterpret_cast<int32_t*>(send.data());
      for (size_t i = 0; i < count; ++i) in[i] = valueOf(r, i);
      auto* out = inPlace ? in : reinterpret_cast<int32_t*>(recv.data());
      RANK_CHECK(ctx, fwAllReduce(in, out, count, fwInt32, fwSum, comm, nullptr) == fwSuccess, "allreduce");
      bool right = true;
      for (size_t i = 0; i < count; ++i) {
        int32_t expected = 0;
        for (int p = 0; p < n; ++p) expected += valueOf(p, i);
        right = right && out[i] == expected;
      }
      RANK_CHECK(ctx, right, "allreduce sum");
      if (!inPlace) {
        bool kept = true;
        for (size_t i = 0; i < count; ++i) kept = kept && in[i] == valueOf(r, i);
        RANK_CHECK(ctx, kept, "allreduce wrote its send buffer");
      }
      RANK_CHECK(ctx, send.guardsIntact() && recv.guardsIntact(), "allreduce wrote outside its buffers");
    }
    {  // reduce-scatter: count per rank
      Buffer send(count * n * 4, skew, mapped), recv(count * 4, skew, mapped);
      auto* in = reinterpret_cast<int32_t*>(send.data());
      for (size_t i = 0; i < count * n; ++i) in[i] = valueOf(r, i);
      auto* out = inPlace ? in + count * r : reinterpret_cast<int32_t*>(recv.data());
      RANK_CHECK(ctx, fwReduceScatter(in, out, count, fwInt32, fwSum, comm, nullptr) == fwSuccess, "reducescatter");
      bool right = true;
      for (size_t i = 0; i < count; ++i) {
        int32_t expected = 0;
        for (int p = 0; p < n; ++p) expected += valueOf(p, count * r + i);
        right = right && out[i] == expected;
      }
      RANK_CHECK(ctx, right, "reducescatter sum");
      RANK_CHECK(ctx, send.guardsIntact() && recv.guardsIntact(), "reducescatter wrote outside its buffers");
    }
    {  // allgather: count per rank
      Buffer send(count * 4, skew, mapped), recv(count * n * 4, skew, mapped);
      auto* gathered = reinterpret_cast<int32_t*>(recv.data());
      auto* in = inPlace ? gathered + count * r : reinterpret_cast<int32_t*>(send.data());
      for (size_t i = 0; i < count; ++i) in[i] = valueOf(r, i);
      RANK_CHECK(ctx, fwAllGather(in, gathered, count, fwInt32, comm, nullptr) == fwSuccess, "allgather");
      std::string wrong;  // the first element that is not its rank's
      for (int p = 0; p < n && wrong.empty(); ++p) {
        for (size_t i = 0; i < count && wrong.empty(); ++i) {
          if (gathered[count * p + i] == valueOf(p, i)) continue;
          wrong = ": block " + std::to_string(p) + " element " + std::to_string(i) + " is " +
                  std::to_string(gathered[count * p + i]) + ", count " + std::to_string(count) +
                  (inPlace ? " in place" : "");
        }
      }
      RANK_CHECK(ctx, wrong.empty(), "allgather blocks" + wrong);
      RANK_CHECK(ctx, send.guardsIntact() && recv.guardsIntact(), "allgather wrote outside its buffers");
    }
    {  // broadcast from the last rank
      Buffer send(count * 4, skew, mapped), recv(count * 4, skew, mapped);
      const int root = n - 1;
      auto* in = reinterpret_cast<int32_t*>(send.data());
      auto* out = inPlace ? in : reinterpret_cast<int32_t*>(recv.data());
      for (size_t i = 0; i < count; ++i) in[i] = r == root ? valueOf(r, i) : -1;
      RANK_CHECK(ctx, fwBroadcast(in, out, count, fwInt32, root, comm, nullptr) == fwSuccess, "broadcast");
      bool right = true;
      for (size_t i = 0; i < count; ++i) right = right && out[i] == valueOf(root, i);
      RANK_CHECK(ctx, right, "broadcast");
      RANK_CHECK(ctx, send.guardsIntact() && recv.guardsIntact(), "broadcast wrote outside its buffers");
    }
    {  // all-to-all of bytes, at an odd address
      const size_t block = count * 4 + 1;
      Buffer send(block * n, skew + 1, mapped), recv(block * n, skew + 1, mapped);
      auto byteOf = [](int from, int to, size_t i) { return static_cast<char>(from * 31 + to * 7 + i * 13 + i / 251); };
      for (int to = 0; to < n; ++to) {
        for (size_t i = 0; i < block; ++i) send.data()[to * block + i] = byteOf(r, to, i);
      }
      char* out = inPlace ? send.data() : recv.data();
      RANK_CHECK(ctx, fwAllToAll(send.data(), out, block, fwInt8, comm, nullptr) == fwSuccess, "alltoall");
      bool right = true;
      for (int from = 0; from < n; ++from) {
        for (size_t i = 0; i < block; ++i) right = right && out[from * block + i] == byteOf(from, r, i);
      }
      RANK_CHECK(ctx, right, "alltoall blocks");
      RANK_CHECK(ctx, send.guardsIntact() && recv.guardsIntact(), "alltoall wrote outside its buffers");
    }
  }
  return failures;
}

// singleCopyBytes: FAIRWAY_SHM_SINGLE_COPY_BYTES (null: the default windows).
// A rank with single copies on and a mapped peer must have mapped it.
void runCollectives(int ranks, const char* singleCopyBytes, bool (*mapped)(int rank)) {
  const bool singleCopies = singleCopyBytes == nullptr || std::strcmp(singleCopyBytes, "0") != 0;
  auto outcomes = runRanks(ranks, [&](const RankContext& ctx) {
    setenv("FAIRWAY_TIMEOUT_MS", "30000", 1);
    if (singleCopyBytes != nullptr) setenv("FAIRWAY_SHM_SINGLE_COPY_BYTES", singleCopyBytes, 1);
    fwComm_t comm;
    if (fwCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank) != fwSuccess) {
      reportFailure(ctx, std::string("init: ") + fwGetLastErrorMessage());
      return 1;
    }
    int failures = 0;
    // In the windows or the rounds, then past the windows (the agreement,
    // then the writes into the peers' outputs), several pieces each.
    for (size_t count : {size_t{1001}, size_t{140001}, size_t{300007}}) {
      for (size_t skew : {size_t{0}, size_t{4}}) failures += collectivesOn(ctx, comm, mapped(ctx.rank), count, skew);
    }
    // The peers' memfds stay mapped here until the communicator goes.
    bool mappedPeer = false;
    for (int p = 0; p < ctx.nranks; ++p) mappedPeer = mappedPeer || (p != ctx.rank && mapped(p));
    const int peerMappings = mappedFiles();
    RANK_CHECK(ctx, singleCopies && mappedPeer ? peerMappings > 0 : peerMappings == 0,
               "mappings of the peers' memory here: " + std::to_string(peerMappings));
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    RANK_CHECK(ctx, mappedFiles() == 0, "the peers' memory stays mapped after destroy");
    return failures;
  });
  for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0) << ranks << " ranks";
}

bool everyRank(int) { return true; }
bool evenRanks(int rank) { return rank % 2 == 0; }

TEST(MappableMemory, CollectivesOnMappedBuffersOfEveryRank) {
  for (int ranks : {2, 3, 4}) runCollectives(ranks, nullptr, everyRank);
}

// With single copies at every size the kernel's reads become plain copies.
TEST(MappableMemory, SingleCopyWindowsReadMappedBuffersInPlace) {
  runCollectives(2, "1", everyRank);
  runCollectives(4, "1", everyRank);
}

// Ranks with malloc'd buffers among mapped ones: past the windows the
// ranks agree on the rounds; in the windows each reads as it can.
TEST(MappableMemory, SomeRanksMappedFallBackAsAnyBuffer) {
  runCollectives(3, nullptr, evenRanks);
  runCollectives(2, "1", evenRanks);
}

// With single copies off nothing maps a peer's memory.
TEST(MappableMemory, SingleCopiesOffMapNothing) { runCollectives(2, "0", everyRank); }

}  // namespace
}  // namespace fairway::testing
