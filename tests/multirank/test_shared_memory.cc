// The node's shared-memory segment: mapped by every local rank and
// unlinked at once, so /dev/shm keeps nothing after a normal exit, an
// abort or a SIGKILL; refused with a clear reason where /dev/shm has no
// room (the collectives then run over UCX); and a local rank that dies
// while the others wait in the segment is named by every survivor.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "providers/shm/round_ring.h"
#include "providers/shm/shm_node.h"
#include "tests/multirank/rank_harness.h"

namespace fairway::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTimeoutMs = 3000;

// How a Fairway segment's name in /dev/shm starts; its creator's pid follows.
constexpr char kSegmentPrefix[] = "fairway-";

// Names in /dev/shm that a Fairway segment would have.
std::set<std::string> segmentFiles() {
  std::set<std::string> names;
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* entry = readdir(dir)) {
      if (std::strncmp(entry->d_name, kSegmentPrefix, std::strlen(kSegmentPrefix)) == 0) names.insert(entry->d_name);
    }
    closedir(dir);
  }
  return names;
}

// This process's mappings of Fairway segments, as /proc/self/maps shows them.
std::vector<std::string> mappedSegments() {
  std::ifstream maps("/proc/self/maps");
  std::vector<std::string> lines;
  for (std::string line; std::getline(maps, line);) {
    if (line.find(std::string("/dev/shm/") + kSegmentPrefix) != std::string::npos) lines.push_back(line);
  }
  return lines;
}

// Sends this process's log (stderr) to path, for the parent to read.
void logTo(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd >= 0) {
    dup2(fd, STDERR_FILENO);
    close(fd);
  }
}

// The file's text; the file is removed.
std::string takeText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  return text.str();
}

// Runs body on nranks ranks with rank 0's log of the INIT subsystem at
// INFO; returns that log, the ranks' outcomes in *outcomes. The settings
// are made before the fork: rank 0 reads them when it makes the unique id.
std::string runLoggingInit(int nranks, const std::function<int(const RankContext&)>& body,
                           std::vector<RankOutcome>* outcomes) {
  const std::string log = "/tmp/fairway-shm-init-" + std::to_string(getpid()) + ".log";
  setenv("FAIRWAY_DEBUG", "INFO", 1);
  setenv("FAIRWAY_DEBUG_SUBSYS", "INIT", 1);
  *outcomes = runRanks(nranks, [&](const RankContext& ctx) {
    if (ctx.rank == 0) logTo(log);
    return body(ctx);
  });
  unsetenv("FAIRWAY_DEBUG");
  unsetenv("FAIRWAY_DEBUG_SUBSYS");
  return takeText(log);
}

// Elements of a storage of at least 32 more than needed, starting skew
// (below 16) elements past its first cache line, so that a test decides
// how far past a line its buffer sits. (The storage is 16-byte aligned,
// so the line is a whole number of elements on.)
int32_t* skewedBuffer(std::vector<int32_t>& storage, size_t skew) {
  const size_t toLine = (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
  return storage.data() + toLine / sizeof(int32_t) + skew;
}

int initOrReport(const RankContext& ctx, fwComm_t* comm) {
  if (fwCommInitRank(comm, ctx.nranks, ctx.id, ctx.rank) == fwSuccess) return 0;
  reportFailure(ctx, std::string("init: ") + fwGetLastErrorMessage());
  return 1;
}

// An allreduce of ones whose result every rank checks.
int allreduceOnes(const RankContext& ctx, fwComm_t comm, size_t count) {
  std::vector<float> a(count, 1.0f), b(count, -1.0f);
  if (fwAllReduce(a.data(), b.data(), count, fwFloat32, fwSum, comm, nullptr) != fwSuccess) {
    reportFailure(ctx, std::string("allreduce: ") + fwGetLastErrorMessage());
    return 1;
  }
  for (float v : b) {
    if (v != static_cast<float>(ctx.nranks)) {
      reportFailure(ctx, "allreduce gave " + std::to_string(v));
      return 1;
    }
  }
  return 0;
}

class SharedMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("FAIRWAY_TIMEOUT_MS", std::to_string(kTimeoutMs).c_str(), 1);
    before_ = segmentFiles();
  }
  void TearDown() override {
    unsetenv("FAIRWAY_TIMEOUT_MS");
    // However the ranks ended, their segments' names are gone. A name
    // carries its creator's pid: only this test's ranks' count (a test
    // running beside this one may be creating a segment right now).
    const std::vector<int>& ours = forkedRankPids();
    for (const std::string& name : segmentFiles()) {
      const int creator = std::atoi(name.c_str() + std::strlen(kSegmentPrefix));
      if (before_.count(name) || std::find(ours.begin(), ours.end(), creator) == ours.end()) continue;
      ADD_FAILURE() << "/dev/shm/" << name << " was left behind";
    }
  }
  std::set<std::string> before_;
};

TEST_F(SharedMemory, SegmentIsMappedByEveryRankAndUnlinked) {
  auto outcomes = runRanks(4, [](const RankContext& ctx) {
    fwComm_t comm;
    if (initOrReport(ctx, &comm)) return 1;
    int failures = 0;
    std::vector<std::string> mapped = mappedSegments();
    RANK_CHECK(ctx, mapped.size() == 1, "one segment mapped, not " + std::to_string(mapped.size()));
    for (const std::string& line : mapped) {
      RANK_CHECK(ctx, line.find("(deleted)") != std::string::npos, "segment still has its name: " + line);
    }
    failures += allreduceOnes(ctx, comm, 100000);
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    RANK_CHECK(ctx, mappedSegments().empty(), "segment still mapped after destroy");
    return failures;
  });
  for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0);
}

// FAIRWAY_INTRA_TRANSPORT=ucx: no segment, the same results over UCX.
TEST_F(SharedMemory, IntraTransportUcxMapsNoSegment) {
  auto outcomes = runRanks(3, [](const RankContext& ctx) {
    setenv("FAIRWAY_INTRA_TRANSPORT", "ucx", 1);
    fwComm_t comm;
    if (initOrReport(ctx, &comm)) return 1;
    int failures = 0;
    RANK_CHECK(ctx, mappedSegments().empty(), "a segment was mapped under FAIRWAY_INTRA_TRANSPORT=ucx");
    failures += allreduceOnes(ctx, comm, 1000);
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    return failures;
  });
  for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0);
}

// The size of this process's one mapped segment (0 if not exactly one).
size_t mappedSegmentBytes() {
  const std::vector<std::string> mapped = mappedSegments();
  if (mapped.size() != 1) return 0;
  unsigned long start = 0, end = 0;
  if (std::sscanf(mapped[0].c_str(), "%lx-%lx", &start, &end) != 2) return 0;
  return end - start;
}

// The node's leader picks the chunk (its own FAIRWAY_SHM_CHUNK_BYTES here:
// ranks may count the host's ranks differently, and with them the
// default); a rank not given one takes it and maps the same segment.
TEST_F(SharedMemory, RanksNotGivenAChunkTakeTheLeaders) {
  auto outcomes = runRanks(3, [](const RankContext& ctx) {
    if (ctx.rank == 0) setenv("FAIRWAY_SHM_CHUNK_BYTES", "64K", 1);
    fwComm_t comm;
    if (initOrReport(ctx, &comm)) return 1;
    int failures = 0;
    const size_t bytes = mappedSegmentBytes();
    RANK_CHECK(ctx, bytes > 0, "no segment mapped");
    size_t smallest = bytes, largest = bytes;
    RANK_CHECK(ctx, fwAllReduce(&bytes, &smallest, 1, fwUint64, fwMin, comm, nullptr) == fwSuccess, "min");
    RANK_CHECK(ctx, fwAllReduce(&bytes, &largest, 1, fwUint64, fwMax, comm, nullptr) == fwSuccess, "max");
    RANK_CHECK(ctx, smallest == largest, "segments of " + std::to_string(smallest) + " and " +
                                             std::to_string(largest) + " bytes");
    RANK_CHECK(ctx, bytes < (size_t{1} << 20), "segment of " + std::to_string(bytes) + " bytes: not 64 KiB chunks");
    failures += allreduceOnes(ctx, comm, 100000);  // many rounds of 64 KiB
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    return failures;
  });
  for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0);
}

// Every split gets a segment of its own; the parent's keeps working.
TEST_F(SharedMemory, SplitsGetTheirOwnSegments) {
  auto outcomes = runRanks(4, [](const RankContext& ctx) {
    fwComm_t comm, half;
    if (initOrReport(ctx, &comm)) return 1;
    int failures = 0;
    RANK_CHECK(ctx, fwCommSplit(comm, ctx.rank % 2, ctx.rank, &half) == fwSuccess, "split");
    RANK_CHECK(ctx, mappedSegments().size() == 2, "parent and split should each map a segment");
    std::vector<int32_t> mine(5000, ctx.rank), sums(5000, -1);
    RANK_CHECK(ctx, fwAllReduce(mine.data(), sums.data(), mine.size(), fwInt32, fwSum, half, nullptr) == fwSuccess,
               "allreduce on the split");
    const int32_t expected = ctx.rank % 2 == 0 ? 0 + 2 : 1 + 3;
    RANK_CHECK(ctx, sums.front() == expected && sums.back() == expected, "split's sum");
    failures += allreduceOnes(ctx, comm, 70000);
    RANK_CHECK(ctx, fwCommDestroy(half) == fwSuccess, "destroy split");
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    return failures;
  });
  for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0);
}

// Out-of-place broadcasts in many rounds: large enough for streaming
// stores (the root fills the segment and its recv in one pass), and
// smaller ones in rounds of a 4 KiB chunk (the root copies each piece to
// recv after posting it); and both read in place (the root copies send
// into recv while the other rank reads send): every rank's recv holds
// the root's send, and the root's send is untouched.
TEST_F(SharedMemory, OutOfPlaceBroadcastInRoundsAndInPlace) {
  const std::pair<const char*, const char*> settings[] = {{"0", "auto"}, {"0", "4096"}, {"1", "auto"}, {"1", "4096"}};
  for (const auto& setting : settings) {
    // Named copies: a lambda may not capture a structured binding in C++17.
    const char* const singleCopy = setting.first;
    const char* const chunk = setting.second;
    auto outcomes = runRanks(2, [&](const RankContext& ctx) {
      setenv("FAIRWAY_SHM_CHUNK_BYTES", chunk, 1);
      setenv("FAIRWAY_SHM_SINGLE_COPY_BYTES", singleCopy, 1);
      fwComm_t comm;
      if (initOrReport(ctx, &comm)) return 1;
      int failures = 0;
      // 20 MiB of int32 in rounds of 1 MiB, or 400 KB in rounds of 4 KiB.
      const size_t count = std::string(chunk) == "auto" ? size_t{5} << 20 : size_t{100003};
      for (int root = 0; root < ctx.nranks; ++root) {
        std::vector<int32_t> send(count), recv(count, -1);
        for (size_t i = 0; i < count; ++i) send[i] = static_cast<int32_t>(root * 1000003 + i);
        RANK_CHECK(ctx, fwBroadcast(send.data(), recv.data(), count, fwInt32, root, comm, nullptr) == fwSuccess,
                   "broadcast");
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i) wrong += recv[i] != static_cast<int32_t>(root * 1000003 + i);
        RANK_CHECK(ctx, wrong == 0, "broadcast value");
        if (ctx.rank == root) {
          for (size_t i = 0; i < count; i += 4099) {
            RANK_CHECK(ctx, send[i] == static_cast<int32_t>(root * 1000003 + i), "send kept");
          }
        }
      }
      RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
      return failures;
    });
    for (auto& o : outcomes) {
      EXPECT_EQ(o.exitCode, 0) << "FAIRWAY_SHM_CHUNK_BYTES=" << chunk << " FAIRWAY_SHM_SINGLE_COPY_BYTES=" << singleCopy;
    }
  }
}

// All-to-all on the segment, in rounds of a 4 KiB chunk (many rounds for
// the larger blocks) and read in place (single copies from 1 byte), out
// of place, in place, and in place on some ranks only (every rank must
// take the same way, whichever its own call is), on 3 ranks (more than
// the CPUs here: blocks from 256 KiB go as messages): block j of rank r
// lands as block r on rank j, whole.
TEST_F(SharedMemory, AllToAllInRoundsAndInPlace) {
  for (const char* singleCopy : {"0", "1"}) {
    auto outcomes = runRanks(3, [&](const RankContext& ctx) {
      setenv("FAIRWAY_SHM_CHUNK_BYTES", "4096", 1);
      setenv("FAIRWAY_SHM_SINGLE_COPY_BYTES", singleCopy, 1);
      fwComm_t comm;
      if (initOrReport(ctx, &comm)) return 1;
      int failures = 0;
      const int n = ctx.nranks;
      auto value = [](int from, int to, size_t i) { return static_cast<int32_t>(from * 1000003 + to * 7919 + i); };
      for (size_t count : {size_t{1}, size_t{7}, size_t{1500}, size_t{100003}}) {
        for (int mode : {0, 1, 2}) {  // out of place, in place, in place on rank 1 only
          const bool inPlace = mode == 1 || (mode == 2 && ctx.rank == 1);
          std::vector<int32_t> send(count * n), recv(count * n, -1);
          for (int to = 0; to < n; ++to) {
            for (size_t i = 0; i < count; ++i) send[to * count + i] = value(ctx.rank, to, i);
          }
          int32_t* out = inPlace ? send.data() : recv.data();
          RANK_CHECK(ctx, fwAllToAll(send.data(), out, count, fwInt32, comm, nullptr) == fwSuccess, "alltoall");
          for (int from = 0; from < n; ++from) {
            for (size_t i = 0; i < count; i += (count > 100 ? 97 : 1)) {
              RANK_CHECK(ctx, out[from * count + i] == value(from, ctx.rank, i), "alltoall value");
            }
            RANK_CHECK(ctx, out[from * count + count - 1] == value(from, ctx.rank, count - 1), "alltoall last value");
          }
        }
      }
      RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
      return failures;
    });
    for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0) << "FAIRWAY_SHM_SINGLE_COPY_BYTES=" << singleCopy;
  }
}

// On each rank count, with single copies from 1 byte (and results
// streaming from streamBytes of the node's outputs, when given): every
// rank makes a communicator, runs body(ctx, comm) (which returns its
// failures) and destroys it; every rank must exit cleanly.
template <typename Body>
void onRanksWithSingleCopies(std::initializer_list<int> rankCounts, Body body, const char* streamBytes = nullptr,
                             const char* chunkBytes = nullptr) {
  for (int ranks : rankCounts) {
    auto outcomes = runRanks(ranks, [&](const RankContext& ctx) {
      setenv("FAIRWAY_SHM_SINGLE_COPY_BYTES", "1", 1);
      if (streamBytes != nullptr) setenv("FAIRWAY_SHM_STREAM_BYTES", streamBytes, 1);
      if (chunkBytes != nullptr) setenv("FAIRWAY_SHM_CHUNK_BYTES", chunkBytes, 1);
      fwComm_t comm;
      if (initOrReport(ctx, &comm)) return 1;
      int failures = body(ctx, comm);
      RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
      return failures;
    });
    for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0) << ranks << " ranks";
  }
}

// Single-copy all-to-all (from 1 byte) on 2 and 4 ranks: ranks in place
// stage blocks of up to a quarter of the streaming bytes over the ranks
// squared (16 KiB on 4 ranks, 64 KiB on 2) in the segment where the
// windows say so (CPUs other than Intel's; on 2 ranks, near cores), and
// swap larger ones pairwise (half
// each, through a 64 KiB bounce buffer, so the larger blocks take several
// pieces), while a rank out of place among them is only read from and the
// blocks it sends a swapping rank land in staging first. Bytes at
// odd addresses, odd counts (a pair's halves differ by one), every rank in
// place, only the odd ones, none; block j of rank r lands as block r on
// rank j, and nothing outside the buffer is written. Results stream from
// 1 MiB of the node's outputs: out of place on 4 ranks the two larger
// counts' blocks are read through the bounce buffer in pieces (of 256 KiB
// and a rest), and land with streaming stores at odd addresses.
TEST_F(SharedMemory, AllToAllInPlaceStagesOrSwapsBlocks) {
  onRanksWithSingleCopies({2, 4}, [](const RankContext& ctx, fwComm_t comm) {
    int failures = 0;
    const int n = ctx.nranks;
    auto value = [](int from, int to, size_t i) { return static_cast<uint8_t>(from * 31 + to * 7 + i * 13 + i / 251); };
    for (size_t count : {size_t{1}, size_t{3}, size_t{4099}, size_t{65537}, size_t{200001}}) {
      for (int mode : {0, 1, 2}) {  // every rank in place, the odd ones only, none
        const bool inPlace = mode == 0 || (mode == 1 && ctx.rank % 2 == 1);
        // One byte in front and one behind: the buffers sit at odd addresses.
        std::vector<uint8_t> send(count * n + 2, 0xA5), recv(count * n + 2, 0x5A);
        for (int to = 0; to < n; ++to) {
          for (size_t i = 0; i < count; ++i) send[1 + to * count + i] = value(ctx.rank, to, i);
        }
        uint8_t* out = inPlace ? send.data() + 1 : recv.data() + 1;
        RANK_CHECK(ctx, fwAllToAll(send.data() + 1, out, count, fwInt8, comm, nullptr) == fwSuccess, "alltoall");
        for (int from = 0; from < n; ++from) {
          bool whole = true;
          for (size_t i = 0; i < count; ++i) whole = whole && out[from * count + i] == value(from, ctx.rank, i);
          RANK_CHECK(ctx, whole, "alltoall block");
        }
        RANK_CHECK(ctx, out[-1] == (inPlace ? 0xA5 : 0x5A) && out[count * n] == (inPlace ? 0xA5 : 0x5A),
                   "alltoall wrote outside its buffer");
        if (!inPlace) {
          bool untouched = true;
          for (int to = 0; to < n; ++to) {
            for (size_t i = 0; i < count; ++i) untouched = untouched && send[1 + to * count + i] == value(ctx.rank, to, i);
          }
          RANK_CHECK(ctx, untouched, "an out-of-place send buffer was written");
        }
      }
    }
    return failures;
  }, "1M");
}

// Single-copy allreduce (from 1 byte: every allreduce past the one-round
// sizes) on 2, 3 and 4 ranks: each rank reduces its slice of every
// rank's input through the bounce buffer (the larger counts take several
// pieces); on 2 ranks it reads the other's slice of the result, on 3 and
// 4 the results pass through the segment in rounds of 64 KiB chunks (the
// larger counts take several, the first publishing the inputs). Out of
// place, in place everywhere, in place on rank 1 only; sums of int32
// (exact) and maxima of float; counts that do not divide by the ranks;
// results streamed from 1 MiB of the node's outputs; the send buffer of an
// out-of-place call is left as it was.
TEST_F(SharedMemory, SingleCopyAllreduceReducesEachSliceOnce) {
  onRanksWithSingleCopies({2, 3, 4}, [](const RankContext& ctx, fwComm_t comm) {
    int failures = 0;
    const int n = ctx.nranks;
    auto value = [](int rank, size_t i) { return static_cast<int32_t>((rank + 1) * 1000 + i % 7919); };
    for (size_t count : {size_t{5001}, size_t{300007}}) {
      for (int mode : {0, 1, 2}) {  // out of place, in place, in place on rank 1 only
        const bool inPlace = mode == 1 || (mode == 2 && ctx.rank == 1);
        std::vector<int32_t> send(count), recv(count, -1);
        for (size_t i = 0; i < count; ++i) send[i] = value(ctx.rank, i);
        int32_t* out = inPlace ? send.data() : recv.data();
        RANK_CHECK(ctx, fwAllReduce(send.data(), out, count, fwInt32, fwSum, comm, nullptr) == fwSuccess, "sum");
        bool right = true;
        for (size_t i = 0; i < count; ++i) {
          int32_t expected = 0;
          for (int r = 0; r < n; ++r) expected += value(r, i);
          right = right && out[i] == expected;
        }
        RANK_CHECK(ctx, right, "int32 sum");
        if (!inPlace) {
          bool untouched = true;
          for (size_t i = 0; i < count; ++i) untouched = untouched && send[i] == value(ctx.rank, i);
          RANK_CHECK(ctx, untouched, "an out-of-place send buffer was written");
        }
        std::vector<float> x(count), y(count, -1.0f);
        for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>((i * 31 + ctx.rank * 17) % 1009);
        float* maxOut = inPlace ? x.data() : y.data();
        RANK_CHECK(ctx, fwAllReduce(x.data(), maxOut, count, fwFloat32, fwMax, comm, nullptr) == fwSuccess, "max");
        right = true;
        for (size_t i = 0; i < count; ++i) {
          float expected = 0.0f;
          for (int r = 0; r < n; ++r) expected = std::max(expected, static_cast<float>((i * 31 + r * 17) % 1009));
          right = right && maxOut[i] == expected;
        }
        RANK_CHECK(ctx, right, "float max");
      }
    }
    return failures;
  }, "1M", "64K");
}

// Single-copy reduce-scatter (from 1 byte) on 2, 3, 4 and 8 ranks: rank r
// reads block r of every peer's input in place and combines it in rank
// order. Out of place, in place everywhere, in place on rank 1 only;
// int8 sums (wrapping) at odd addresses, int32 sums that take several
// bounce pieces (exact) and float averages (finalised once); counts of
// 1, 7 and more. Results stream from 1 MiB of the node's outputs, so the
// largest out-of-place calls store through the cache-resident piece.
// Nothing outside the output is written, and an out-of-place input is
// left as it was.
TEST_F(SharedMemory, SingleCopyReduceScatterReadsEachBlockInPlace) {
  onRanksWithSingleCopies({2, 3, 4, 8}, [](const RankContext& ctx, fwComm_t comm) {
    int failures = 0;
    const int n = ctx.nranks;
    auto value = [](int rank, size_t i) { return static_cast<int32_t>((rank + 1) * 1000 + i % 7919); };
    auto byteOf = [](int rank, size_t i) { return static_cast<uint8_t>(rank * 37 + i * 11 + i / 253); };
    const size_t largest = n <= 4 ? 140001 : 20001;
    for (size_t count : {size_t{1}, size_t{7}, largest}) {
      for (int mode : {0, 1, 2}) {  // out of place, in place, in place on rank 1 only
        const bool inPlace = mode == 1 || (mode == 2 && ctx.rank == 1);
        const std::string what = std::to_string(count) + (inPlace ? " in place" : " out of place");
        // int8 at odd addresses: one byte in front of either buffer.
        std::vector<uint8_t> bytesIn(count * n + 2, 0xA5), bytesOut(count + 2, 0x5A);
        for (size_t i = 0; i < count * n; ++i) bytesIn[1 + i] = byteOf(ctx.rank, i);
        uint8_t* out8 = inPlace ? bytesIn.data() + 1 + count * ctx.rank : bytesOut.data() + 1;
        RANK_CHECK(ctx, fwReduceScatter(bytesIn.data() + 1, out8, count, fwInt8, fwSum, comm, nullptr) == fwSuccess,
                   "int8 " + what);
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i) {
          uint8_t expected = 0;
          for (int r = 0; r < n; ++r) expected = static_cast<uint8_t>(expected + byteOf(r, ctx.rank * count + i));
          wrong += out8[i] != expected;
        }
        RANK_CHECK(ctx, wrong == 0, std::to_string(wrong) + " wrong int8 sums, " + what);
        RANK_CHECK(ctx, bytesIn.front() == 0xA5 && bytesIn.back() == 0xA5, "written before or after the input");
        if (!inPlace) {
          RANK_CHECK(ctx, bytesOut.front() == 0x5A && bytesOut.back() == 0x5A, "written outside the output");
          size_t changed = 0;
          for (size_t i = 0; i < count * n; ++i) changed += bytesIn[1 + i] != byteOf(ctx.rank, i);
          RANK_CHECK(ctx, changed == 0, "an out-of-place input was written, " + what);
        }
        // Elements of T from inputOf(rank, i), the results of this rank's
        // block checked by accepts(result, i), i counted over the input.
        auto reduceScatterOf = [&](auto zero, fwDataType_t type, fwRedOp_t op, auto inputOf, auto accepts,
                                   const std::string& name) {
          using T = decltype(zero);
          std::vector<T> send(count * n), recv(count, static_cast<T>(-1));
          for (size_t i = 0; i < count * n; ++i) send[i] = inputOf(ctx.rank, i);
          T* out = inPlace ? send.data() + count * ctx.rank : recv.data();
          RANK_CHECK(ctx, fwReduceScatter(send.data(), out, count, type, op, comm, nullptr) == fwSuccess,
                     name + " " + what);
          size_t wrongResults = 0;
          for (size_t i = 0; i < count; ++i) wrongResults += !accepts(out[i], ctx.rank * count + i);
          RANK_CHECK(ctx, wrongResults == 0, std::to_string(wrongResults) + " wrong " + name + " results, " + what);
        };
        reduceScatterOf(int32_t{0}, fwInt32, fwSum, value, [&](int32_t got, size_t i) {
          int32_t expected = 0;
          for (int r = 0; r < n; ++r) expected += value(r, i);
          return got == expected;
        }, "int32 sum");
        auto floatOf = [](int rank, size_t i) { return static_cast<float>((i * 31 + rank * 17) % 1009); };
        reduceScatterOf(0.0f, fwFloat32, fwAvg, floatOf, [&](float got, size_t i) {
          float sum = 0.0f;
          for (int r = 0; r < n; ++r) sum += floatOf(r, i);
          return std::fabs(got - sum / static_cast<float>(n)) <= 1e-3f;
        }, "float avg");
      }
    }
    return failures;
  }, "1M");
}

// Single-copy reads (FAIRWAY_SHM_SINGLE_COPY_BYTES) from 1 byte: every
// allgather and broadcast reads the owners' buffers in place (an in-place
// broadcast's root writing its share of theirs), in and out of place,
// blocks that do not divide evenly and every root; the log says
// the node turned them on, so this is not the copy path passing for them.
// Results stream from 1 MiB of the node's outputs: the largest allgather
// out of place reads its peers' blocks through the bounce buffer.
TEST_F(SharedMemory, SingleCopyAllgatherAndBroadcast) {
  std::vector<RankOutcome> outcomes;
  const std::string text = runLoggingInit(3, [&](const RankContext& ctx) {
    setenv("FAIRWAY_SHM_SINGLE_COPY_BYTES", "1", 1);
    setenv("FAIRWAY_SHM_STREAM_BYTES", "1M", 1);
    fwComm_t comm;
    if (initOrReport(ctx, &comm)) return 1;
    int failures = 0;
    const int n = ctx.nranks;
    for (size_t count : {size_t{1}, size_t{7}, size_t{100003}}) {
      for (bool inPlace : {false, true}) {
        std::vector<int32_t> all(count * n, -1), mine(count);
        for (size_t i = 0; i < count; ++i) mine[i] = static_cast<int32_t>(ctx.rank * 1000003 + i);
        if (inPlace) std::copy(mine.begin(), mine.end(), all.begin() + count * ctx.rank);
        const void* send = inPlace ? static_cast<const void*>(all.data() + count * ctx.rank) : mine.data();
        RANK_CHECK(ctx, fwAllGather(send, all.data(), count, fwInt32, comm, nullptr) == fwSuccess, "allgather");
        size_t wrong = 0;
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) wrong += all[r * count + i] != static_cast<int32_t>(r * 1000003 + i);
        }
        RANK_CHECK(ctx, wrong == 0, std::to_string(wrong) + " wrong allgather values");
      }
      // In place the root writes the tail of each reader's buffer while
      // the reader reads the rest: every element is checked, and the
      // guards on either side stay as they were.
      for (int root = 0; root < n; ++root) {
        for (bool inPlace : {true, false}) {
          std::vector<int32_t> storage(count + 2, -1), source(count);
          int32_t* buf = storage.data() + 1;
          for (size_t i = 0; i < count; ++i) source[i] = static_cast<int32_t>(root + 3 * i);
          if (ctx.rank == root && inPlace) std::copy(source.begin(), source.end(), buf);
          const void* send = ctx.rank == root && !inPlace ? source.data() : buf;
          RANK_CHECK(ctx, fwBroadcast(send, buf, count, fwInt32, root, comm, nullptr) == fwSuccess, "broadcast");
          size_t wrong = 0;
          for (size_t i = 0; i < count; ++i) wrong += buf[i] != source[i];
          RANK_CHECK(ctx, wrong == 0, std::to_string(wrong) + " wrong values from root " + std::to_string(root));
          RANK_CHECK(ctx, storage.front() == -1 && storage.back() == -1, "broadcast wrote outside its buffer");
        }
      }
    }
    RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
    return failures;
  }, &outcomes);
  for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0);
  // (Between the all-to-all's window and the broadcasts', where in-place
  // all-to-all blocks stage in the segment, the sizes that do.)
  EXPECT_NE(text.find("single-copy reads: allgather blocks from 1, all-to-all blocks from 1"), std::string::npos)
      << text;
  EXPECT_NE(text.find("broadcasts from 1, allreduces from 1, reduce-scatters from 1"), std::string::npos) << text;
  EXPECT_NE(text.find("results stream past the caches from 1M of the node's outputs (FAIRWAY_SHM_STREAM_BYTES)"),
            std::string::npos)
      << text;
}

// Where the single-copy windows depend on how far apart the two ranks'
// cores are (CPUs other than Intel's), both ranks measure a line's round
// trip at creation, and the windows in the log are those of the trip
// measured; where they do not, nothing is measured. A rank whose peer
// shares its core (another test's ranks busy on the other) may give up
// measuring within its bound and take the near windows, saying so: of
// a communicator and three splits of it, each must say what it chose and
// agree with it, and at least one must have measured.
TEST_F(SharedMemory, TwoRanksChooseTheirWindowsByTheirCoresRoundTrip) {
  constexpr int kCommunicators = 4;
  std::vector<RankOutcome> outcomes;
  const std::string text = runLoggingInit(2, [&](const RankContext& ctx) {
    // The communicator and three splits of it, each with a segment of its own.
    fwComm_t parent;
    if (initOrReport(ctx, &parent)) return 1;
    int failures = allreduceOnes(ctx, parent, 1000);
    for (int i = 1; i < kCommunicators; ++i) {
      fwComm_t comm = nullptr;
      RANK_CHECK(ctx, fwCommSplit(parent, 0, ctx.rank, &comm) == fwSuccess, "split");
      if (comm == nullptr) return failures;
      failures += allreduceOnes(ctx, comm, 1000);
      RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy the split");
    }
    RANK_CHECK(ctx, fwCommDestroy(parent) == fwSuccess, "destroy");
    return failures;
  }, &outcomes);
  for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0);
  std::vector<std::string> choices;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("single-copy reads: ") != std::string::npos) choices.push_back(line);
  }
  EXPECT_EQ(choices.size(), static_cast<size_t>(kCommunicators)) << text;
  int measured = 0;
  for (const std::string& line : choices) {
    const size_t at = line.find("the cores' round trip ");
    if (cpuIsIntel()) {
      EXPECT_EQ(at, std::string::npos) << line;
      continue;
    }
    ASSERT_NE(at, std::string::npos) << line;
    const long ns = std::atol(line.c_str() + at + std::strlen("the cores' round trip "));
    const bool far = ns >= static_cast<long>(SharedMemoryNode::kFarRoundTripNs);
    if (ns > 0) {
      ++measured;
      EXPECT_NE(line.find(far ? "ns: far" : "ns: near"), std::string::npos) << line;
    } else {
      EXPECT_NE(line.find("round trip not measured: near"), std::string::npos) << line;
    }
    EXPECT_NE(line.find(far ? "all-to-all blocks of 16K-4M, " : "all-to-all blocks of 512K-2M"), std::string::npos)
        << line;
    // Near, in-place blocks of 512 KiB stage where a sixteenth of the
    // node's streaming bytes (its last-level cache) holds them.
    const size_t streamAt = line.find("results stream past the caches from ");
    ASSERT_NE(streamAt, std::string::npos) << line;
    char* unit = nullptr;
    size_t streamBytes = std::strtoull(line.c_str() + streamAt + std::strlen("results stream past the caches from "),
                                       &unit, 10);
    streamBytes <<= *unit == 'G' ? 30 : *unit == 'M' ? 20 : *unit == 'K' ? 10 : 0;
    const bool staged = !far && streamBytes / 16 >= 512 * 1024;
    EXPECT_EQ(line.find("in place staged in the segment up to 512K") != std::string::npos, staged) << line;
    EXPECT_NE(line.find(far ? "broadcasts of 16K-16M" : "broadcasts of 2M-3M"), std::string::npos) << line;
    EXPECT_NE(line.find(far ? "allreduces of 2M-8M" : "allreduces of 2M-3M"), std::string::npos) << line;
    EXPECT_NE(line.find(far ? "reduce-scatters of 32K-16M" : "reduce-scatters none"), std::string::npos) << line;
  }
  if (!cpuIsIntel()) {
    EXPECT_GT(measured, 0) << "no communicator measured its round trip:\n" << text;
  }
}

// Draws below a bound from a seed: the same sequence on every rank, so
// the ranks make the same calls.
class SameDraws {
 public:
  explicit SameDraws(uint64_t seed) : state_(seed) {}
  uint64_t operator()(uint64_t below) {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return (state_ >> 33) % below;
  }

 private:
  uint64_t state_;
};

// Rounds of every size one after another, so each input region is placed
// after regions of other sizes (round_ring.h): on 2 ranks rounds from 4
// or 32 KiB (by CPU) walk the ring, on 3 they keep to its halves. All-to-
// alls run in place on any mix of ranks. Every value is checked,
// and one rank now and then falls behind, so a region written while a
// peer still read it would show. The buffers sit at a different offset
// from a cache line on each rank and in each call, so a round of copies
// starts at its writer's offset into its region, not the reader's.
int mixedRounds(const RankContext& ctx) {
  fwComm_t comm;
  if (initOrReport(ctx, &comm)) return 1;
  int failures = 0;
  const int n = ctx.nranks;
  SameDraws next(12345);
  for (int call = 0; call < 120 && failures == 0; ++call) {
    // 1 KiB to 640 KiB per rank: under, at and past each slot size.
    const size_t count = 256 + next(160 * 1024);
    const int kind = static_cast<int>(next(5));
    const bool lag = next(3) == 0;  // drawn on every rank, so the sequences stay alike
    // Which ranks call an all-to-all in place: every mix of them.
    const bool inPlace = (next(uint64_t{1} << n) >> ctx.rank) & 1;
    if (lag && ctx.rank == call % n) usleep(200);
    size_t wrong = 0;
    auto value = [](int rank, size_t i) { return static_cast<int32_t>(rank * 131 + (i * 7) % 1009); };
    // 0 to 60 bytes past a line.
    const size_t skew = static_cast<size_t>(call * 7 + ctx.rank * 5) % 16;
    if (kind == 0) {  // allgather
      std::vector<int32_t> mineStorage(count + 32), allStorage(count * n + 32, -1);
      int32_t* mine = skewedBuffer(mineStorage, (skew + 3) % 16);
      int32_t* all = skewedBuffer(allStorage, skew);
      for (size_t i = 0; i < count; ++i) mine[i] = value(ctx.rank, i);
      RANK_CHECK(ctx, fwAllGather(mine, all, count, fwInt32, comm, nullptr) == fwSuccess, "allgather");
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < count; ++i) wrong += all[r * count + i] != value(r, i);
      }
    } else if (kind == 1) {  // broadcast
      const int root = static_cast<int>(next(static_cast<uint64_t>(n)));
      std::vector<int32_t> storage(count + 32, -1);
      int32_t* buf = skewedBuffer(storage, skew);
      if (ctx.rank == root) for (size_t i = 0; i < count; ++i) buf[i] = value(root, i);
      RANK_CHECK(ctx, fwBroadcast(buf, buf, count, fwInt32, root, comm, nullptr) == fwSuccess, "broadcast");
      for (size_t i = 0; i < count; ++i) wrong += buf[i] != value(root, i);
    } else if (kind == 4) {  // all-to-all, blocks of count / n
      const size_t block = count / n;
      std::vector<int32_t> sendStorage(block * n + 32), recvStorage(block * n + 32, -1);
      int32_t* send = skewedBuffer(sendStorage, skew);
      int32_t* recv = inPlace ? send : skewedBuffer(recvStorage, (skew + 5) % 16);
      auto sent = [&](int from, int to, size_t i) { return value(from, to * block + i); };
      for (int to = 0; to < n; ++to) {
        for (size_t i = 0; i < block; ++i) send[to * block + i] = sent(ctx.rank, to, i);
      }
      RANK_CHECK(ctx, fwAllToAll(send, recv, block, fwInt32, comm, nullptr) == fwSuccess, "alltoall");
      for (int from = 0; from < n; ++from) {
        for (size_t i = 0; i < block; ++i) wrong += recv[from * block + i] != sent(from, ctx.rank, i);
      }
    } else {  // allreduce, or reduce-scatter of count per rank
      const size_t total = kind == 2 ? count : count * n;
      std::vector<int32_t> mine(total), out(kind == 2 ? total : count, -1);
      for (size_t i = 0; i < total; ++i) mine[i] = value(ctx.rank, i);
      const fwResult_t rc =
          kind == 2 ? fwAllReduce(mine.data(), out.data(), total, fwInt32, fwSum, comm, nullptr)
                    : fwReduceScatter(mine.data(), out.data(), count, fwInt32, fwSum, comm, nullptr);
      RANK_CHECK(ctx, rc == fwSuccess, kind == 2 ? "allreduce" : "reduce-scatter");
      const size_t first = kind == 2 ? 0 : count * ctx.rank;
      for (size_t i = 0; i < out.size(); ++i) {
        int32_t sum = 0;
        for (int r = 0; r < n; ++r) sum += value(r, first + i);
        wrong += out[i] != sum;
      }
    }
    RANK_CHECK(ctx, wrong == 0,
               "call " + std::to_string(call) + " (kind " + std::to_string(kind) + ", count " +
                   std::to_string(count) + "): " + std::to_string(wrong) + " wrong values");
  }
  RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
  return failures;
}

// With the default single-copy windows and with every size from 16 KiB
// read in place: calls in rounds then lie between single copies, and
// in-place all-to-alls that stage their blocks in the segment (up to a
// quarter of 1 MiB over the ranks squared: 64 KiB blocks on 2 ranks, 28
// KiB on 3, where the windows stage) place them in the same ring as the
// rounds.
TEST_F(SharedMemory, RoundsOfMixedSizesNeverOverwriteWhatAPeerReads) {
  // The default chunk (4 MiB with more ranks than CPUs), the one of a CPU
  // per rank, and one of no whole number of cache lines (never halved).
  for (const std::string chunk : {"", "262144", "100000"}) {
    for (const std::string singleCopy : {"", "16K"}) {
      for (int nranks : {2, 3}) {
        SCOPED_TRACE(std::to_string(nranks) + " ranks, chunk " + (chunk.empty() ? "default" : chunk) +
                     ", single copies " + (singleCopy.empty() ? "by default" : "from " + singleCopy));
        auto outcomes = runRanks(nranks, [&](const RankContext& ctx) {
          if (!chunk.empty()) setenv("FAIRWAY_SHM_CHUNK_BYTES", chunk.c_str(), 1);
          if (!singleCopy.empty()) {
            setenv("FAIRWAY_SHM_SINGLE_COPY_BYTES", singleCopy.c_str(), 1);
            setenv("FAIRWAY_SHM_STREAM_BYTES", "1M", 1);
          }
          return mixedRounds(ctx);
        });
        for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0);
      }
    }
  }
}

// A local rank killed while the others wait in the segment (a collective
// of many rounds) is named by every survivor within the timeout.
TEST_F(SharedMemory, KilledLocalRankIsNamedByEverySurvivor) {
  auto outcomes = runRanks(4, [](const RankContext& ctx) {
    setenv("FAIRWAY_SHM_CHUNK_BYTES", "4096", 1);  // many rounds per call
    fwComm_t comm;
    if (initOrReport(ctx, &comm)) return 1;
    std::vector<float> a(1 << 18, 1.0f), b(1 << 18);
    for (int i = 0; i < 1000; ++i) {
      if (ctx.rank == 1 && i == 3) raise(SIGKILL);
      auto start = Clock::now();
      fwResult_t r = fwAllReduce(a.data(), b.data(), a.size(), fwFloat32, fwSum, comm, nullptr);
      if (r == fwSuccess) continue;
      int failures = 0;
      RANK_CHECK(ctx, r == fwRemoteError, std::string("result ") + fwGetErrorString(r));
      RANK_CHECK(ctx, std::strstr(fwGetLastErrorMessage(), "rank 1") != nullptr, "message names rank 1");
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      RANK_CHECK(ctx, ms < kTimeoutMs, "took " + std::to_string(ms) + " ms");
      fwCommAbort(comm);
      return failures;
    }
    reportFailure(ctx, "1000 allreduces succeeded although rank 1 was killed");
    return 1;
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(outcomes[r].exitCode, r == 1 ? 128 + SIGKILL : 0) << "rank " << r;
}

TEST_F(SharedMemory, AbortLeavesNothingBehind) {
  auto outcomes = runRanks(3, [](const RankContext& ctx) {
    fwComm_t comm;
    if (initOrReport(ctx, &comm)) return 1;
    int failures = allreduceOnes(ctx, comm, 10);
    RANK_CHECK(ctx, fwCommAbort(comm) == fwSuccess, "abort");
    return failures;
  });
  for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0);
}

// Broadcasts let their root run up to 64 rounds ahead of the ranks that
// read them (their rounds walk the ring and publish in slots of their
// own): hundreds of them back to back, from every root, 4 B to 12 KB,
// with a reader now and then falling behind, so the root reuses slots and
// input bytes while they may still be read; small reductions (inline
// lines) and allgathers (the parity's place) come between them. A chunk
// of 4 KiB wraps the ring every few calls; 3 ranks outnumber the CPUs
// here. Every value is checked after every call.
TEST_F(SharedMemory, BroadcastsRunAheadOfLaggingReaders) {
  for (const std::string chunk : {"", "4096"}) {
    for (int nranks : {2, 3}) {
      SCOPED_TRACE(std::to_string(nranks) + " ranks, chunk " + (chunk.empty() ? "default" : chunk));
      auto outcomes = runRanks(nranks, [&chunk](const RankContext& ctx) {
        if (!chunk.empty()) setenv("FAIRWAY_SHM_CHUNK_BYTES", chunk.c_str(), 1);
        fwComm_t comm;
        if (initOrReport(ctx, &comm)) return 1;
        int failures = 0;
        const int n = ctx.nranks;
        SameDraws next(777);
        auto value = [](int call, size_t i) { return static_cast<int32_t>(call * 7919 + i); };
        for (int call = 0; call < 400 && failures == 0; ++call) {
          const uint64_t what = next(20);
          const bool lag = next(8) == 0;
          if (lag && ctx.rank == call % n) usleep(300);
          size_t wrong = 0;
          if (what == 0) {  // an inline allreduce
            std::vector<double> in(5, ctx.rank + 1.0), out(5, 0.0);
            RANK_CHECK(ctx, fwAllReduce(in.data(), out.data(), 5, fwFloat64, fwSum, comm, nullptr) == fwSuccess,
                       "allreduce");
            for (double v : out) wrong += v != n * (n + 1) / 2.0;
          } else if (what == 1) {  // an allgather
            std::vector<int32_t> mine(300, ctx.rank), all(300 * n, -1);
            RANK_CHECK(ctx, fwAllGather(mine.data(), all.data(), 300, fwInt32, comm, nullptr) == fwSuccess,
                       "allgather");
            for (size_t i = 0; i < all.size(); ++i) wrong += all[i] != static_cast<int32_t>(i / 300);
          } else {
            const int root = static_cast<int>(next(static_cast<uint64_t>(n)));
            const size_t count = 1 + next(3000);
            std::vector<int32_t> send(count), recv(count, -1);
            for (size_t i = 0; i < count; ++i) send[i] = value(call, i);
            // Out of place on the root for odd calls, in place otherwise.
            void* from = ctx.rank == root && call % 2 == 1 ? static_cast<void*>(send.data()) : recv.data();
            if (ctx.rank == root && from == recv.data()) recv = send;
            RANK_CHECK(ctx, fwBroadcast(from, recv.data(), count, fwInt32, root, comm, nullptr) == fwSuccess,
                       "broadcast");
            for (size_t i = 0; i < count; ++i) wrong += recv[i] != value(call, i);
          }
          RANK_CHECK(ctx, wrong == 0,
                     "call " + std::to_string(call) + ": " + std::to_string(wrong) + " wrong values");
        }
        RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
        return failures;
      });
      for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0);
    }
  }
}

// A broadcast's rounds publish in their slot, every other round in the
// parity's place: a rank in an allreduce whose peer is in a broadcast at
// the same round (or the other way round) finds the peer's descriptor
// in the other place and names the peer's broadcast or allreduce.
TEST_F(SharedMemory, BroadcastAgainstAnotherCollectiveIsNamed) {
  for (const bool oddOneBroadcasts : {false, true}) {
    SCOPED_TRACE(oddOneBroadcasts ? "rank 2 broadcasts" : "ranks 0 and 1 broadcast");
    auto outcomes = runRanks(3, [oddOneBroadcasts](const RankContext& ctx) {
      setenv("FAIRWAY_TIMEOUT_MS", "20000", 1);
      fwComm_t comm;
      if (initOrReport(ctx, &comm)) return 1;
      int failures = 0;
      std::vector<double> a(1000, 1.0), b(1000, 0.0);
      const bool broadcasts = (ctx.rank == 2) == oddOneBroadcasts;
      const fwResult_t r = broadcasts ? fwBroadcast(a.data(), b.data(), 1000, fwFloat64, 0, comm, nullptr)
                                      : fwAllReduce(a.data(), b.data(), 1000, fwFloat64, fwSum, comm, nullptr);
      if (ctx.rank == 2 || !broadcasts) {
        // Rank 2 always waits for a peer of the other call; the allreduce's
        // ranks wait for rank 2 too. The broadcast's own ranks may finish.
        // A lone allreduce rank 2 hears from no failing peer first: it
        // finds the mismatch itself.
        const bool mustFind = ctx.rank == 2 && !broadcasts;
        RANK_CHECK(ctx, r == fwCollectiveMismatch || (!mustFind && r == fwRemoteError),
                   std::string("result ") + fwGetErrorString(r));
        if (r == fwCollectiveMismatch) {
          const char* named = broadcasts ? "shared-memory allreduce" : "shared-memory broadcast";
          RANK_CHECK(ctx, std::strstr(fwGetLastErrorMessage(), named) != nullptr,
                     std::string("the message names the peer's call: ") + fwGetLastErrorMessage());
        }
      }
      fwCommAbort(comm);
      return failures;
    });
    for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0);
  }
}

// Ranks that call different collectives, or with different counts, are
// told so by the segment's round descriptors, before any data is read:
// in the general rounds, in the inline rounds of small reductions (one
// line or two), and between the two.
TEST_F(SharedMemory, MismatchedCallsAreDiagnosedInTheSegment) {
  auto outcomes = runRanks(3, [](const RankContext& ctx) {
    // (rank 2's count, the others'), in doubles: 11 fit the inline lines, 4 the first.
    const std::pair<size_t, size_t> cases[] = {{4000, 1000}, {4, 1000}, {2, 4}, {4, 8}, {8, 10}, {11, 1}};
    int failures = 0;
    fwComm_t parent;
    if (initOrReport(ctx, &parent)) return 1;
    for (const auto& [odd, usual] : cases) {
      fwComm_t comm;  // a split of its own for each case: a mismatch breaks it
      if (fwCommSplit(parent, 0, ctx.rank, &comm) != fwSuccess) {
        reportFailure(ctx, std::string("split: ") + fwGetLastErrorMessage());
        return failures + 1;
      }
      std::vector<double> a(4096, 1.0), b(4096, 0.0);
      const size_t count = ctx.rank == 2 ? odd : usual;
      const std::string what = "counts " + std::to_string(odd) + " and " + std::to_string(usual) + ": ";
      fwResult_t r = fwAllReduce(a.data(), b.data(), count, fwFloat64, fwSum, comm, nullptr);
      RANK_CHECK(ctx, r == fwCollectiveMismatch || r == fwRemoteError,
                 what + "result " + fwGetErrorString(r));
      RANK_CHECK(ctx, std::strstr(fwGetLastErrorMessage(), "count") != nullptr, what + "message names the count");
      RANK_CHECK(ctx, std::all_of(b.begin() + count, b.end(), [](double v) { return v == 0.0; }),
                 what + "nothing written past this rank's count");
      fwCommAbort(comm);
    }
    RANK_CHECK(ctx, fwCommDestroy(parent) == fwSuccess, "destroy");
    return failures;
  });
  for (auto& o : outcomes) EXPECT_EQ(o.exitCode, 0);
}

// /dev/shm too small for the segment (a 32 MiB tmpfs mounted over it in a
// private mount namespace, room for UCX's own shared memory but not for
// chunks of 64 MiB; root only): the leader's warning names the size and
// the free space, and the collectives still run, over UCX.
TEST_F(SharedMemory, FullDevShmIsReportedAndFallsBackToUcx) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a small /dev/shm needs root";
  const std::string log = "/tmp/fairway-shm-test-" + std::to_string(getpid()) + ".log";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=32m") != 0) {
      _exit(77);  // no mount namespaces here
    }
    auto outcomes = runRanks(2, [&](const RankContext& ctx) {
      setenv("FAIRWAY_DEBUG", "WARN", 1);
      setenv("FAIRWAY_SHM_CHUNK_BYTES", "64M", 1);
      if (ctx.rank == 0) logTo(log);
      fwComm_t comm;
      if (initOrReport(ctx, &comm)) return 1;
      int failures = 0;
      RANK_CHECK(ctx, mappedSegments().empty(), "a segment was mapped although /dev/shm is full");
      failures += allreduceOnes(ctx, comm, 50000);
      RANK_CHECK(ctx, fwCommDestroy(comm) == fwSuccess, "destroy");
      return failures;
    });
    _exit(outcomes[0].exitCode != 0 || outcomes[1].exitCode != 0 ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "no private mount namespace here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "ranks failed under a full /dev/shm";
  const std::string text = takeText(log);
  EXPECT_NE(text.find("shared-memory segment needs"), std::string::npos) << text;
  EXPECT_NE(text.find("/dev/shm has"), std::string::npos) << text;
  EXPECT_NE(text.find("run over UCX"), std::string::npos) << text;
}

}  // namespace
}  // namespace fairway::testing
