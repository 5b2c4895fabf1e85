// What the peer benchmarks (Open MPI, Gloo, NCCL) share with Fairway's perf
// binaries: the flags they take (-C collective -b -e -f -n -w), nccl-tests'
// sizes and busbw factors, the warm-up rule (first_size_warmup.h), the
// timing rule (mean over ranks of the time per iteration after a barrier)
// and the columns, so that compare.sh reads every library's output the
// same way. Sums of float32 or, where the library has the type, bfloat16
// (-d). Also the launcher variables the peers that are not launched by
// mpirun read.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "perf/first_size_warmup.h"
#include "core/command_line_numbers.h"

namespace fairway::peer {

enum class Collective { AllReduce, ReduceScatter, AllGather, Broadcast, AllToAll };
enum class DataType { Float32, BFloat16 };

struct Options {
  Collective collective = Collective::AllReduce;
  DataType type = DataType::Float32;
  // -I 1: every call in place (the result over the input, as each library
  // spells it); a broadcast always is.
  bool inPlace = false;
  size_t minBytes = 8, maxBytes = 64 << 20;
  double factor = 2;
  int iters = 20, warmup = 5;
};

// The first of the launchers' variables that is set (fairwayrun's,
// torchrun's, Open MPI's, Intel MPI's, Slurm's), or `fallback`.
inline int launcherValue(std::initializer_list<const char*> names, int fallback) {
  for (const char* n : names) {
    if (const char* v = std::getenv(n)) return std::atoi(v);
  }
  return fallback;
}
inline int launcherRank() {
  return launcherValue({"FAIRWAY_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}, -1);
}
inline int launcherSize() {
  return launcherValue({"FAIRWAY_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, -1);
}
inline int launcherLocalRank() {
  return launcherValue({"FAIRWAY_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}, 0);
}
// Ranks on this node; -1 when no launcher says.
inline int launcherLocalSize() {
  return launcherValue({"FAIRWAY_LOCAL_SIZE", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}, -1);
}

inline const char* collectiveName(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "allreduce";
    case Collective::ReduceScatter: return "reducescatter";
    case Collective::AllGather: return "allgather";
    case Collective::Broadcast: return "broadcast";
    case Collective::AllToAll: return "alltoall";
  }
  return "?";
}

inline const char* typeName(DataType t) { return t == DataType::Float32 ? "float" : "bfloat16"; }
inline size_t elementSize(DataType t) { return t == DataType::Float32 ? 4 : 2; }
// 1.0 in the type's bits, what every input holds.
inline uint32_t oneBits(DataType t) { return t == DataType::Float32 ? 0x3f800000u : 0x3f80u; }

// nccl-tests: allreduce moves 2(n-1)/n of the buffer per rank, broadcast
// all of it, the others (n-1)/n.
inline double busFactor(Collective c, int n) {
  if (c == Collective::Broadcast) return 1.0;
  return (c == Collective::AllReduce ? 2.0 : 1.0) * (n - 1) / n;
}

// Sizes as in nccl-tests: the whole buffer, which reduce-scatter's input,
// allgather's output and each all-to-all buffer are (n blocks of count / n).
inline size_t blockCount(Collective c, size_t count, int n) {
  return c == Collective::AllReduce || c == Collective::Broadcast ? count : count / static_cast<size_t>(n);
}

inline bool parseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) return false;
    const char* v = argv[i + 1];
    if (!std::strcmp(argv[i], "-C")) {
      if (!std::strcmp(v, "allreduce")) o->collective = Collective::AllReduce;
      else if (!std::strcmp(v, "reducescatter")) o->collective = Collective::ReduceScatter;
      else if (!std::strcmp(v, "allgather")) o->collective = Collective::AllGather;
      else if (!std::strcmp(v, "broadcast")) o->collective = Collective::Broadcast;
      else if (!std::strcmp(v, "alltoall")) o->collective = Collective::AllToAll;
      else return false;
    } else if (!std::strcmp(argv[i], "-d")) {
      if (!std::strcmp(v, "float")) o->type = DataType::Float32;
      else if (!std::strcmp(v, "bfloat16")) o->type = DataType::BFloat16;
      else return false;
    } else if (!std::strcmp(argv[i], "-I")) {
      if (std::strcmp(v, "0") != 0 && std::strcmp(v, "1") != 0) return false;
      o->inPlace = v[0] == '1';
    } else if (!std::strcmp(argv[i], "-b")) {
      if (!fairway::parseSize(v, &o->minBytes)) return false;
    } else if (!std::strcmp(argv[i], "-e")) {
      if (!fairway::parseSize(v, &o->maxBytes)) return false;
    } else if (!std::strcmp(argv[i], "-f")) {
      if (!fairway::parseFactor(v, &o->factor)) return false;
    } else if (!std::strcmp(argv[i], "-n")) {
      if (!fairway::parseInt(v, &o->iters)) return false;
    } else if (!std::strcmp(argv[i], "-w")) {
      if (!fairway::parseInt(v, &o->warmup)) return false;
    } else {
      return false;
    }
  }
  return o->minBytes > 0 && o->minBytes <= o->maxBytes && o->factor > 1 && o->iters > 0 && o->warmup >= 0;
}

inline void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [-C allreduce|reducescatter|allgather|broadcast|alltoall] [-d float|bfloat16] [-I 0|1] "
               "[-b bytes[K|M|G]] [-e bytes[K|M|G]] [-f factor] [-n iters] [-w warmup]\n"
               "  -I 1: in place\n"
               "  -w: warm-up iterations before each size; the first size also warms up for at least %d ms\n",
               argv0, perf::kFirstSizeWarmupMs);
}

// What a peer that fairwayrun (or torchrun, srun) launches starts from:
// the sweep's options, rank and size from the launcher's variables, and
// PEER_STORE_DIR, the directory its ranks meet in. False, with the usage
// printed, when any of them is missing or wrong.
struct LaunchedPeer {
  Options options;
  int rank = -1, size = -1;
  const char* storeDir = nullptr;
};
inline bool parseLaunchedPeer(int argc, char** argv, LaunchedPeer* out) {
  out->rank = launcherRank();
  out->size = launcherSize();
  out->storeDir = std::getenv("PEER_STORE_DIR");
  if (parseOptions(argc, argv, &out->options) && out->rank >= 0 && out->size >= 1 && out->storeDir != nullptr) {
    return true;
  }
  usage(argv[0]);
  std::fprintf(stderr, "  needs a launcher's rank and size variables and PEER_STORE_DIR (a directory all ranks see)\n");
  return false;
}

// run(blockCount) runs (or enqueues) the collective once; barrier() and
// meanOverRanks(x) are the library's own; finish() waits for enqueued work
// (a device stream) before the clock stops. Prints nccl-tests' out-of-place
// columns on rank 0.
template <typename Run, typename Barrier, typename Mean, typename Finish>
void sweep(const Options& o, const char* library, int rank, int nranks, Run run, Barrier barrier,
           Mean meanOverRanks, Finish finish) {
  if (rank == 0) {
    std::printf("# %s %s %s sum, %d ranks%s\n", library, collectiveName(o.collective), typeName(o.type), nranks,
                o.inPlace ? ", in place" : "");
    std::fflush(stdout);
  }
  for (size_t bytes = o.minBytes; bytes <= o.maxBytes; bytes = static_cast<size_t>(bytes * o.factor)) {
    const size_t es = elementSize(o.type);
    const size_t count = bytes / es;
    const size_t block = blockCount(o.collective, count, nranks);
    for (int i = 0; i < o.warmup; ++i) run(block);
    if (bytes == o.minBytes) {
      auto batch = [&] {
        for (int i = 0; i < std::max(o.warmup, 1); ++i) run(block);
        finish();
        return true;
      };
      // The mean of rank 0's 1 or 0 and zeros: the same on every rank.
      auto agree = [&](bool wanted, bool* more) {
        *more = meanOverRanks(wanted ? 1.0 : 0.0) > 0;
        return true;
      };
      // Neither step reports failure: a peer library's failed call ends
      // the process (MPI's fatal error handler, Gloo's exception, NCCL's
      // check), so there is no result to look at.
      (void)perf::warmUpFirstSize(rank, batch, agree);
    }
    barrier();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i) run(block);
    finish();
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / o.iters;
    double mean = meanOverRanks(us);
    double algbw = static_cast<double>(count * es) / mean / 1e3;
    if (rank == 0) {
      std::printf("%12zu  %12zu  %8s  %6s  %6d  %7.2f  %6.2f  %6.2f\n", count * es, count, typeName(o.type), "sum", -1,
                  mean, algbw, algbw * busFactor(o.collective, nranks));
      std::fflush(stdout);
    }
  }
}

// A host buffer of `bytes` (rounded up to whole elements, plus one) with
// every element 1.0 of the type: written before timing, so every page is
// the buffer's own.
struct HostBuffer {
  HostBuffer(DataType t, size_t bytes, bool ones) : words((bytes + 8) / 4) {
    const uint32_t one = oneBits(t);
    const uint32_t word = !ones ? 0 : t == DataType::Float32 ? one : (one << 16) | one;
    std::fill(words.begin(), words.end(), word);
  }
  void* data() { return words.data(); }
  std::vector<uint32_t> words;
};

// For libraries whose calls return when the collective is done.
inline void nothingToFinish() {}

}  // namespace fairway::peer
