// The shared-memory node's defaults, each chosen by measurement: the
// size of a round (its chunk per rank) and the single-copy windows, the
// sizes at which a collective reads its peers' buffers in place instead
// of passing through the segment. Every rank of a node computes the same.
#include "core/config.h"
#include "core/config_parse.h"
#include "providers/shm/shm_node.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace fairway {

namespace {

// The first word of a sysfs file, or "" where there is none.
std::string firstWordOf(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  in >> word;
  return word;
}

// sysfs's cache size ("8192K"), in bytes; 0 where it is not one.
size_t cacheSizeBytes(const std::string& path) {
  size_t bytes = 0;
  return parseByteText(path, firstWordOf(path).c_str(), 1, kNoUpperEnd, &bytes).isOk() ? bytes : 0;
}

}  // namespace

// Where streaming stores start to win is where the node's outputs no
// longer fit its last-level cache. On the reference machine (an AMD EPYC
// guest whose sysfs gives an 8 MiB L3 shared by its 2 cores, while cpuid
// claims 64 MiB; its cores' round trip about 480 ns), against the 32 MiB
// this once was, medians of 4 runs in ABBA order, us a call, out of
// place: 4 ranks allreduce of 2 and 4 MiB 2,480 to 2,040 and 5,110 to
// 4,170, allgather 1,030 to 840 and 2,550 to 1,850, broadcast of 4 MiB
// 3,000 to 2,290; 8 ranks allgather of 1 and 2 MiB 795 to 540 and 2,110
// to 1,270, allreduce of 2 MiB 5,130 to 4,330, broadcast 2,120 to 1,530;
// reduce-scatter (whose output is a rank's share) unchanged. From half
// the cache (4 MiB) they lost: 4-rank allgather and broadcast of 1 MiB
// 325 to 385 and 410 to 445.
size_t SharedMemoryNode::defaultStreamingNodeBytes(const std::string& cpuDir) {
  int bestLevel = 0;
  size_t bytes = 0;
  for (int index = 0;; ++index) {
    const std::string dir = cpuDir + "/cache/index" + std::to_string(index);
    const std::string level = firstWordOf(dir + "/level");
    if (level.empty()) break;
    if (firstWordOf(dir + "/type") == "Instruction") continue;
    // An unreadable size of the last level leaves 0, so the fallback,
    // not a lower level's size.
    const int l = std::atoi(level.c_str());
    if (l > bestLevel) {
      bestLevel = l;
      bytes = cacheSizeBytes(dir + "/size");
    }
  }
  return bytes > 0 ? bytes : kStreamingNodeBytes;
}

// Read once a process: every communicator and split of it would read the
// same files again.
size_t SharedMemoryNode::defaultStreamingNodeBytes() {
  static const size_t bytes = [] {
    const int cpu = sched_getcpu();
    return defaultStreamingNodeBytes("/sys/devices/system/cpu/cpu" + std::to_string(cpu < 0 ? 0 : cpu));
  }();
  return bytes;
}

// With a CPU per rank, rounds of about 2 MiB in all, each rank's chunk
// 256 KiB (kShmChunkBytesPerCpu) to 1 MiB: a round's copies stay in the
// caches (4 MiB of L2 a core on the reference machine) and a collective
// takes few hand-overs. Each hand-over waits for the peer to be run; on
// quiet cores that is a cache line's trip, beside busy processes a
// scheduler's decision, so beside them a 2-rank DDP step in rounds of 256
// KiB ran about 0.9x gloo's speed and in rounds of 1 MiB 1.2x, with quiet
// busbw within 3% (docs/torch_bench.md).
// With more ranks than CPUs every hand-over between ranks waits for the
// scheduler to run the peer, which beside busy processes takes a time
// slice (1.5-3 ms here) whatever the round holds: a collective then costs
// about its rounds times that, so rounds are made few. 4 ranks on 2 cores
// beside two busy processes, allreduce of 4 MiB: 108 ms in rounds of 256
// KiB a rank, 8 ms in one round of 4 MiB a rank (gloo: 17.6 ms); a DDP
// step 0.40 to 1.18 times gloo's speed. On quiet cores the larger rounds
// measured the same or faster (4 and 8 ranks on 2 cores, 64 KiB-64 MiB).
// The caps keep the segment of a split to 4 chunks a rank.
size_t SharedMemoryNode::defaultChunkBytes(int ranks, bool oversubscribed) {
  if (ranks < 1) return kShmChunkBytesPerCpu;
  const size_t roundBytes = oversubscribed ? size_t{16} << 20 : size_t{2} << 20;
  const size_t mostChunk = oversubscribed ? size_t{4} << 20 : size_t{1} << 20;
  return std::clamp(roundBytes / static_cast<size_t>(ranks), kShmChunkBytesPerCpu, mostChunk) & ~size_t{63};
}

// Measured on 2 ranks with a CPU each (float32 allgather, docs/design/shared_memory.md
// "Single copies"): one process_vm_readv per block, with peers reading a
// block while its owner copies it into place, beats the segment's two
// copies from 8 KiB blocks (32 KiB allgather out of place: 6.0-6.5 GB/s
// busbw against 3.4-3.5) to 16 MiB ones, and loses from 32 MiB (3.6
// against 5.0-5.4), where the kernel's copy, without streaming stores,
// falls behind the segment's. With more ranks than CPUs it lost or tied
// at every size (a read waits for its owner to be scheduled); more ranks
// with a CPU each have not been measured, so they keep the two copies.
// That on Intel Xeon. On AMD EPYC, once the copy loop's prefetch kept to
// its source (core/copy_kernels.inc), the rounds won below 256 KiB
// blocks, us a call, out of place / in place, medians of 5 interleaved
// runs: 8 KiB blocks 2.68/2.53 read against 1.80/1.67 in rounds, 32 KiB
// 5.83/4.87 against 4.63/3.62, 128 KiB 18.3/17.2 against 19.1/13.5; at
// 256 KiB the reads won out of place (38.6 against 52.9) and lost in
// place (47.3 against 30.2); from 512 KiB to 4 MiB they won both ways
// (2 MiB 1.17/0.39 ms against 1.42/1.02); at 8 MiB they lost out of place
// (5.2 against 3.8 ms) and tied in place. An out-of-place call is the
// common one (torch's all_gather_into_tensor), so the window there was 256
// KiB to 4 MiB. Since the rounds' results stream from the last-level cache
// (8 MiB here, not 32), they win at 4 MiB blocks between near cores, us a
// call, medians of 6 runs in ABBA order: 8 MiB allgathers 1,915/1,343
// read against 1,312/1,124 in rounds, 4 MiB 707/418 against 703/389 (a
// tie), so the window ends at 2 MiB blocks.
// Between far cores (a line's round trip of about 495 ns there, 120 ns
// near) the rounds slowed far more than the reads, which won from 16 KiB
// blocks to 4 MiB both ways, us a call, out of place / in place, medians
// of 4 interleaved runs: 8 KiB blocks 4.21/4.46 read against 4.29/4.17
// in rounds, 16 KiB 5.25/4.88 against 7.21/6.76, 64 KiB 13.6/10.3
// against 25.7/21.9 (near: 9.9/8.0 against 9.8/7.6), 512 KiB 135/107
// against 224/187 (near: 88/101 against 170/84), 4 MiB 2.94/1.53 ms
// against 3.18/2.39; at 8 MiB they lost out of place (5.9 against 5.2
// ms) and won in place (3.4 against 4.0).
SharedMemoryNode::SizeWindow SharedMemoryNode::defaultAllgatherSingleCopy(int ranks, bool oversubscribed,
                                                                          Cores cores) {
  if (ranks != 2 || oversubscribed) return {};
  if (cores.intel) return {size_t{8} << 10, size_t{16} << 20};
  if (cores.far) return {size_t{16} << 10, size_t{4} << 20};
  return {size_t{256} << 10, size_t{2} << 20};
}

// 2 ranks with a CPU each: from 16 KiB blocks to 16 MiB. At 8 KiB the
// swap's two system calls a peer cost more than the rounds' copies in
// place (busbw GB/s, 5000-call windows: 3.9-4.1 in rounds against 2.7-2.8)
// while the reads gain less out of place (3.9-4.2 against 3.5-3.9), so the
// rounds take it; at 16 KiB the reads lead out of place, median 5.5
// against 4.4, and trail in place, 4.2 against 4.6; from 32 KiB the reads
// and swaps lead (64 KiB blocks
// 6.9-10.5 against 5.0-5.6 out of place, 7.4-9.7 against 4.6-5.8 in
// place; 1 MiB in place 11-13 against 4.4-6.2 with blocks staged).
// Beyond 16 MiB blocks the swap would win in place (4.5-5.2 against
// 3.8-4.3) and the reads lose out of place (2.3-2.8 against 3.1-3.6):
// the window cannot depend on that, as a peer cannot tell. With more
// ranks than CPUs, unlike allgather's, every block is
// read or swapped once where the segment's rounds copy it twice and the
// pairwise messages (UCX's CMA) read it once after a rendezvous each:
// busbw GB/s, before (rounds below 256 KiB blocks, messages above) and
// after, out of place / in place, medians of 3-5 alternations:
//   4 ranks on 2 cores: 32 KiB blocks 3.7/3.8 to 4.1/3.0 (left out),
//     64 KiB 3.2/3.8 to 5.6/4.6, 2 MiB 3.4/2.0 to 3.5/4.3, 16 MiB
//     1.8/0.9 to 1.7/2.6, 64 MiB 1.8/1.2 to 2.0/2.8;
//   8 ranks on 2 cores: 8 KiB 1.4/1.4 to 1.1/0.7 (left out), 32 KiB
//     1.2/1.6 to 1.8/1.8, 128 KiB 1.4/1.8 to 2.1/2.3, 2 MiB 1.0/0.6 to
//     1.2/1.6, 16 MiB 0.9/0.7 to 1.1/1.3.
// More ranks with a CPU each have not been measured: two copies.
// All of that on Intel Xeon. On AMD EPYC, measured as allgather's above:
// 2 ranks, the rounds won both ways below 512 KiB blocks (16 KiB 4.0/4.8
// us read against 2.4/1.9, 256 KiB 53.6/46.9 against 31.5/19.9), from
// 512 KiB to 2 MiB the reads won out of place (1 MiB 0.46 ms against
// 0.78) while the swaps lost in place (0.27 against 0.13), and from 4
// MiB the rounds tied or won; the window keeps the out-of-place gain,
// where in place the rounds lead the peers anyway. 4 ranks on 2 cores:
// at 64 KiB blocks the rounds won both ways (89/98 us against 58/48), at
// 128 KiB the reads won out of place (170-200 against 263-268) and lost
// in place (207-221 against 99-103), from 256 KiB they won both ways; so
// the window starts at 256 KiB there. 8 ranks kept 32 KiB (32 KiB blocks
// 250/294 us against 413/179, 128 KiB 1.49/1.04 ms against 2.45/2.04).
// Between far cores, 2 ranks (measured with allgather's above): the
// reads won out of place from 16 KiB blocks to 4 MiB and, but for 16 KiB
// (6.81 against 7.18 us, a tie), in place too: 8 KiB blocks 3.99/5.81 us
// read against 4.22/4.52 in rounds, 16 KiB 4.81/6.81 against 12.4/7.2,
// 64 KiB 12.6/12.6 against 23.8/21.3 (near: 11.4/10.1 against 7.5/5.5),
// 512 KiB 110/133 against 219/168, 4 MiB 2.97/1.29 ms against 3.33/1.71;
// at 8 MiB they lost out of place (5.9 against 5.5 ms) and won in place
// (2.9 against 3.5).
// Once an in-place call staged blocks of up to 128 KiB on 4 ranks
// (defaultStagesAlltoallInPlace), 128 KiB blocks (512 KiB all-to-alls)
// joined the window there, us a call, out of place / in place, medians
// of 12 runs in ABBA order: 156/96 read against 214/87 in rounds; 64 KiB
// blocks still lost out of place (87 against 57).
SharedMemoryNode::SizeWindow SharedMemoryNode::defaultAlltoallSingleCopy(int ranks, bool oversubscribed,
                                                                         Cores cores) {
  if (!oversubscribed) {
    if (ranks != 2) return {};
    if (cores.intel) return {size_t{16} << 10, size_t{16} << 20};
    if (cores.far) return {size_t{16} << 10, size_t{4} << 20};
    return {size_t{512} << 10, size_t{2} << 20};
  }
  if (ranks < 3) return {};
  if (ranks >= 8) return {size_t{32} << 10, kNoUpperEnd};
  return {cores.intel ? size_t{64} << 10 : size_t{128} << 10, kNoUpperEnd};
}

// In place, a rank's block for q lies where q's block for it must land.
// Swapping each pair's blocks (two system calls a piece) moves every
// byte once; staging copies the rank's blocks into its input area first,
// where its peers read them with plain copies, and reads each peer's
// block straight into place. Measured on AMD EPYC, us a call in place,
// swaps against staged blocks, medians of 4-16 runs in ABBA order, filed
// near or far by the cores' round trip before each run:
//   2 ranks, near: 32 KiB all-to-alls 4.6 against 3.7, 128 KiB 10.1
//     against 5.9, 1 MiB 126 against 44 (in rounds 49); far: the swaps
//     won, 32 KiB 6.9 against 8.3, 128 KiB 11.8 against 21.8, 1 MiB 130
//     against 167;
//   4 ranks on 2 cores: 512 KiB (128 KiB blocks) 216 against 143 near,
//     211 against 198 far; 1 MiB 432 against 567 near, 440 against 480
//     far;
//   8 ranks on 2 cores: 256 KiB (32 KiB blocks) 275 against 151 near,
//     296 against 244 far; 512 KiB 492 against 640, 503 against 539.
// Staging won while the node's staged blocks came to 2 MiB or less (a
// quarter of the 8 MiB last-level cache: the staged copies and the
// buffers stay in it) and lost beyond. Out of place nothing changed.
// Intel Xeon has not been measured: there the swaps stay.
bool SharedMemoryNode::defaultStagesAlltoallInPlace(Cores cores) { return !cores.intel && !cores.far; }

size_t SharedMemoryNode::alltoallStagedBlockBytes() const {
  if (!singleCopy_.stagesAlltoall) return 0;
  const size_t ranks = static_cast<size_t>(ranks_);
  return std::min(streamingNodeBytes_ / 4 / (ranks * ranks), chunkBytes_ / ranks);
}

// Measured the same way (2-rank broadcast_perf, medians of 3 alternations,
// design/shared_memory.md "Single copies"): the other rank reading the root's buffer
// beat the segment's pipelined copies, before their rounds ran ahead,
// from 16 KiB (9.2-9.8 GB/s against 5.7-7.6) to 32 MiB out of place,
// where the root copies send into recv
// while it is read (4 MiB 11.0 against 6.9, 32 MiB 9.4 against 8.3), and
// to 2 MiB in place (512 KiB 22.3 against 17.0); in place the pipelined
// copies are ahead from 4 MiB by less (4-32 MiB 10.6-11.6 against
// 9.6-10.6) than they are behind out of place, and the window cannot
// depend on it: only the root knows whether its call is in place. At 64
// MiB the pipelined copies win both ways (10.7 and 7.1 against 5.2 and
// 5.8); below 32 KiB the read's system call costs more than the copies
// of rounds that run ahead (16 KiB 1.32-1.37 us a call against 1.39-1.51).
// Those in-place reads were the reader's alone; since the root writes a
// share of them (shm_single_copy.cc) they run 1.5-2.5 times as fast from
// 256 KiB to 32 MiB (an AMD EPYC machine of 2 cores).
// All of that on Intel Xeon. On AMD EPYC the kernel's copy ran at about
// half a memcpy's rate from 16 MiB (64 MiB: 4.0-4.2 GB/s against 9.0-9.4),
// and broadcasts of 16 and 32 MiB read in place at 3.0-3.1 GB/s busbw out
// of place and 5.2-6.4 in place, against the rounds' 5.8-6.4 and 7.6-8.5;
// at 8 MiB they tied (3.2 against 3.0), at 4 MiB they won (3.3-3.9
// against 3.1, in place 7.8-9.8 against 6.2-6.9), so the window ends there.
// Once the copy loop's prefetch kept to its source (core/copy_kernels.inc)
// the rounds there won below 2 MiB both ways, us a call, out of place /
// in place, medians of 5-6 interleaved runs: 32 KiB 4.4/3.3 read against
// 2.8/1.5, 512 KiB 50.8/42.2 against 43.2/19.6, 1 MiB 174/131 against
// 139/69; at 2 MiB the reads won out of place (296 against 705) and lost
// in place (204 against 153), at 4 MiB they won both ways (1.40/0.48 ms
// against 1.55/0.74), so there the window starts at 2 MiB. Since the
// rounds' results stream from the last-level cache (8 MiB here, so from
// 4 MiB broadcasts on 2 ranks), the rounds win from there, medians of 6
// runs in ABBA order: 4 MiB 1,161/364 read against 472/297 in rounds, 8
// MiB 2,814/1,313 against 1,322/1,003; so the window ends below 4 MiB,
// where the rounds do not stream yet.
// Between far cores (a line's round trip of 764 ns there, 120 ns near)
// the rounds slowed far more than the reads, which won from 16 KiB to 16
// MiB both ways, us a call, out of place / in place, medians of 4
// interleaved runs (near, the same sizes): 4 KiB 2.46/3.31 read against
// 2.04/1.74 in rounds (1.90/2.19 against 0.90/0.69), 8 KiB 2.88/3.46
// against 3.75/2.60, 16 KiB 3.71/3.63 against 6.43/5.46 (3.11/2.52
// against 3.13/0.95), 64 KiB 8.3/6.1 against 16.7/14.6 (7.4/4.9 against
// 4.8/2.6), 1 MiB 191/90 against 320/241 (104/89 against 99/49), 16 MiB
// 6.5/3.7 ms against 7.8/4.7 (6.3/3.3 against 3.0/2.4).
SharedMemoryNode::SizeWindow SharedMemoryNode::defaultBroadcastSingleCopy(int ranks, bool oversubscribed,
                                                                           Cores cores) {
  if (ranks != 2 || oversubscribed) return {};
  if (cores.intel) return {size_t{32} << 10, size_t{32} << 20};
  if (cores.far) return {size_t{16} << 10, size_t{16} << 20};
  return {size_t{2} << 20, size_t{3} << 20};
}

// Measured on 2 ranks with a CPU each (all_reduce_perf, float32, three
// alternations; design/shared_memory.md "Allreduce"): reading the peer's slices in place
// beat the rounds at 2-8 MiB both in and out of place (4 MiB 5.6-7.6 GB/s
// busbw against 4.7-5.2 out of place, 7.0-9.1 against 5.2-5.9 in place);
// at 1 MiB it lost in place (4.4-5.4 against 5.5-6.0), from 16 MiB out of
// place (64 MiB 3.2-3.6 against 4.6-5.4), where the rounds stream their
// results past the caches and the kernel's copies do not. With ranks
// sharing CPUs it lost or tied (8 ranks on 2 cores, 4 MiB: 1.2-1.5
// against 2.0), each read waiting for its owner to be scheduled.
// On AMD EPYC, filed near or far by the cores' round trip before each run
// (us a call, out of place / in place, medians of 10 runs in ABBA order,
// the rounds against the reads): between far cores the reads won at 2-4
// MiB (2 MiB 825/610 against 540/587, 4 MiB 1,590/1,418 against
// 1,405/1,231) and tied at 8 MiB (3,192/2,949 against 3,303/2,862);
// between near cores they won at 2 MiB out of place (789/433 against
// 491/458) and lost from 4 MiB (4 MiB 1,086/1,199 against 1,501/1,047, 8
// MiB 2,231/2,437 against 3,481/2,989), where the rounds' results stream
// past the last-level cache. So near cores there read 2 to 3 MiB.
// With more ranks than CPUs the reads now take only the inputs, and the
// results pass through the segment as in the rounds
// (allreduceReadingInputs): 3 and 4 ranks on 2 cores, out of place / in
// place, medians of 3-6 runs in ABBA order, the rounds against the reads,
// near and far alike from 4 MiB: 4 ranks 4 MiB 3,671/4,429 against
// 3,036/3,880 near, 3,879/4,123 against 3,245/3,862 far, 64 MiB
// 62,617/73,241 against 49,342/61,772 near; 3 ranks 4 MiB 3,224/3,565
// against 2,832/3,297, 32 MiB 26,689/30,526 against 24,129/28,422. At 2
// MiB they tied in place (1,846 against 1,819; 3 ranks 1,610 against
// 1,553) and at 1 MiB lost in place far (772 against 973). 8 ranks lost
// (2 MiB 3,637/4,100 against 3,987/4,835, 32 MiB 62,346/71,796 against
// 66,023/76,332): each read waits for its owner to be scheduled.
SharedMemoryNode::SizeWindow SharedMemoryNode::defaultAllreduceSingleCopy(int ranks, bool oversubscribed,
                                                                          Cores cores) {
  if (oversubscribed) return ranks >= 3 && ranks <= 4 ? SizeWindow{size_t{4} << 20, kNoUpperEnd} : SizeWindow{};
  if (ranks != 2) return {};
  if (!cores.intel && !cores.far) return {size_t{2} << 20, size_t{3} << 20};
  return {size_t{2} << 20, size_t{8} << 20};
}

// Reduce-scatters (the whole input's size), measured on AMD EPYC
// (reduce_scatter_perf, float32, us a call, out of place / in place,
// medians of 3-5 runs in ABBA order, each run filed near or far by the
// cores' round trip just before it; the rounds against the reads, where
// rank r reads block r of the peers' inputs in place and streams results
// past the last-level cache, which the rounds' combine does not).
// - 2 ranks between near cores: the rounds won to 2 MiB (1 MiB 51/43
//   against 105/97), tied at 16 MiB (3,484/2,978 against 3,458/2,986)
//   and won between but for 4 MiB in place (4 MiB 855/646 against
//   972/583, 8 MiB 1,769/1,477 against 1,957/1,825; medians of 10 runs
//   each): no window.
// - Between far cores, where each line the rounds hand over costs a long
//   round trip, the reads won from 32 KiB (6.7/6.0 against 4.9/5.5; 16
//   KiB 3.5/3.9 against 3.9/4.3) to 16 MiB (64 KiB 10.9/10.7 against
//   6.9/7.9, 1 MiB 145/145 against 105/94, 16 MiB 4,021/3,505 against
//   2,698/2,553) and lost in place from 32 MiB (5,303 against 6,586).
// - More ranks than CPUs, near and far alike: 4 ranks on 2 cores, the
//   reads won from 1 MiB (380-448/415-463 against 354-382/361-390; 512
//   KiB 91/94 near against 181/177) with no upper end (64 MiB
//   39,925-41,267/42,557-43,118 against 27,219-27,639/27,091-27,891); 8
//   ranks from 4 MiB (5,114-5,487/5,368-5,631 against 4,440-4,840/
//   4,803-4,960; 2 MiB 2,469-2,488/2,507-2,603 against
//   2,625-2,723/2,757-2,991), 64 MiB 86,226-88,055/93,178-95,400 against
//   58,074-61,716/62,640-65,200.
// Intel CPUs, whose cores hand lines over cheaply, are taken for near
// ones (not measured there).
SharedMemoryNode::SizeWindow SharedMemoryNode::defaultReduceScatterSingleCopy(int ranks, bool oversubscribed,
                                                                              Cores cores) {
  if (oversubscribed) return {ranks <= 4 ? size_t{1} << 20 : size_t{4} << 20, kNoUpperEnd};
  if (ranks == 2 && cores.far && !cores.intel) return {size_t{32} << 10, size_t{16} << 20};
  return {};
}

}  // namespace fairway
