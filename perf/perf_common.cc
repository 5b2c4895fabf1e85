#include "perf/perf_common.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/compression.h"
#include "core/datatype.h"
#include "perf/check_data.h"
#include "perf/first_size_warmup.h"
#include "perf/perf_memory.h"
#include "perf/perf_options.h"

namespace fairway::perf {

void* ownBlockOfRecv(const PerfBuffers& b) {
  return static_cast<char*>(b.recv) + b.rank * blockElements(b.count, b.nranks) * check::elementSize(b.datatype);
}

namespace {

// One row of the table, kept for -J.
struct Row {
  size_t bytes, count;
  fwDataType_t type;
  fwRedOp_t op;
  int root;
  double timeUs[2], algbw[2], busbw[2];  // [0] out-of-place, [1] in-place
  double callUs[2];  // the calling thread's time inside one call, the slowest rank's
  uint64_t wrong[2];
  double error[2];  // -q: relative L2 error against the full-precision result
  bool hasInPlace;
  // What the summary averages: out-of-place and in-place, or out-of-place alone.
  double meanBusbw() const { return hasInPlace ? (busbw[0] + busbw[1]) / 2 : busbw[0]; }
};

double averageBusbw(const std::vector<Row>& rows) {
  double sum = 0;
  for (const Row& r : rows) sum += r.meanBusbw();
  return rows.empty() ? 0.0 : sum / static_cast<double>(rows.size());
}

uint64_t wrongValues(const std::vector<Row>& rows) {
  uint64_t wrong = 0;
  for (const Row& r : rows) wrong += r.wrong[0] + r.wrong[1];
  return wrong;
}


#define FW_CHECK(call)                                                                               \
  do {                                                                                               \
    fwResult_t r_ = (call);                                                                          \
    if (r_ != fwSuccess) {                                                                           \
      std::fprintf(stderr, "%s:%d %s failed: %s: %s\n", __FILE__, __LINE__, #call, fwGetErrorString(r_), \
                   fwGetLastErrorMessage());                                                         \
      return false;                                                                                  \
    }                                                                                                \
  } while (0)

struct Measurement {
  double timeUs = 0;
  // Time inside the calls alone, before the wait for the device: all of
  // timeUs for host buffers, the enqueue cost for device calls, which
  // return before their work has run.
  double callUs = 0;
  uint64_t wrong = 0;
  double error = 0;  // -q
};

class Sweep {
 public:
  Sweep(const PerfCollective& c, const Options& o, fwComm_t comm, int rank, int nranks)
      : c_(c), o_(o), comm_(comm), rank_(rank), nranks_(nranks) {}

  bool allocate() {
    size_t maxElems = o_.maxBytes;  // enough for every type: at least 1 byte per element
    sendBytesCap_ = c_.sendElements(maxElems, nranks_);
    recvBytesCap_ = c_.recvElements(maxElems, nranks_);
    send_ = perf::allocate(o_.memory, sendBytesCap_ + 64);
    recv_ = perf::allocate(o_.memory, recvBytesCap_ + 64);
    expected_ = perf::allocate(Memory::Host, recvBytesCap_ + 64);
    // Device buffers are filled and checked through host mirrors.
    const bool mirrored = onDevice(o_.memory);
    hostSend_ = mirrored ? perf::allocate(Memory::Host, sendBytesCap_ + 64) : send_;
    hostRecv_ = mirrored ? perf::allocate(Memory::Host, recvBytesCap_ + 64) : recv_;
    if (!send_ || !recv_ || !expected_ || !hostSend_ || !hostRecv_) {
      std::fprintf(stderr, "%s: cannot allocate %zu bytes of %s buffers\n", c_.name,
                   sendBytesCap_ + 2 * recvBytesCap_, mirrored ? "device and host" : "host");
      return false;
    }
    return true;
  }

  ~Sweep() {
    if (hostSend_ != send_) release(Memory::Host, hostSend_);
    if (hostRecv_ != recv_) release(Memory::Host, hostRecv_);
    release(o_.memory, send_);
    release(o_.memory, recv_);
    release(Memory::Host, expected_);
  }

  const std::vector<Row>& rows() const { return rows_; }

  // Measures every row; rows() then holds them on every rank (times and
  // wrong counts are combined across ranks), and rank 0 has printed them.
  bool run() {
    size_t sizes = 0;
    for (size_t bytes = o_.minBytes;; bytes = next(bytes)) {
      ++sizes;
      if (bytes >= o_.maxBytes) break;
    }
    const size_t total = sizes * o_.types.size() * o_.ops.size();
    const auto start = std::chrono::steady_clock::now();
    auto lastProgress = start;
    for (fwDataType_t type : o_.types) {
      for (fwRedOp_t op : o_.ops) {
        for (size_t bytes = o_.minBytes; bytes <= o_.maxBytes; bytes = next(bytes)) {
          const size_t es = check::elementSize(type);
          size_t count = bytes / es;
          PerfBuffers b{send_, recv_, count, type, op, o_.root, comm_, rank_, nranks_,
                        o_.compressed() ? &o_.compression : nullptr, onDevice(o_.memory)};
          Measurement out, in;
          const bool hasInPlace = c_.inPlaceSend != nullptr;
          if (!measure(b, false, &out) || (hasInPlace && !measure(b, true, &in))) return false;
          const double sizeBytes = static_cast<double>(count * es), factor = c_.busFactor(nranks_);
          const double algOut = sizeBytes / out.timeUs / 1e3, algIn = hasInPlace ? sizeBytes / in.timeUs / 1e3 : 0;
          rows_.push_back(Row{count * es, count, type, op, c_.usesRoot ? o_.root : -1, {out.timeUs, in.timeUs},
                              {algOut, algIn}, {algOut * factor, algIn * factor}, {out.callUs, in.callUs},
                              {out.wrong, in.wrong},
                              {out.error, in.error}, hasInPlace});
          if (rank_ == 0) printRow(rows_.back());
          reportProgress(rows_.size(), total, start, &lastProgress);
          if (bytes == o_.maxBytes) break;
        }
      }
    }
    return true;
  }

  // Long sweeps say how far they are, on stderr (the table stays clean),
  // at most every kProgressSeconds.
  void reportProgress(size_t done, size_t total, std::chrono::steady_clock::time_point start,
                      std::chrono::steady_clock::time_point* last) const {
    constexpr double kProgressSeconds = 10;
    const auto now = std::chrono::steady_clock::now();
    if (rank_ != 0 || done == total || std::chrono::duration<double>(now - *last).count() < kProgressSeconds) return;
    *last = now;
    std::fprintf(stderr, "# progress: %zu of %zu rows done, %.0f s elapsed\n", done, total,
                 std::chrono::duration<double>(now - start).count());
  }

  void printRow(const Row& r) const {
    std::printf("%12zu  %12zu  %8s  %6s  %6d", r.bytes, r.count, datatypeName(r.type), c_.usesOp ? opName(r.op) : "none",
                r.root);
    for (int p = 0; p < 2; ++p) {
      if (p == 1 && !r.hasInPlace) {
        std::printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
      } else if (o_.compressed()) {
        std::printf("  %7.2f  %6.2f  %6.2f  %6.1e", r.timeUs[p], r.algbw[p], r.busbw[p], r.error[p]);
      } else {
        std::printf("  %7.2f  %6.2f  %6.2f  %6llu", r.timeUs[p], r.algbw[p], r.busbw[p],
                    static_cast<unsigned long long>(r.wrong[p]));
      }
    }
    std::printf("\n");
    std::fflush(stdout);
  }

  size_t next(size_t bytes) const {
    size_t n = o_.stepFactor > 1 ? static_cast<size_t>(bytes * o_.stepFactor) : bytes + o_.stepBytes;
    if (n <= bytes) n = bytes + 1;
    return std::min(n, bytes < o_.maxBytes ? o_.maxBytes : n);
  }

  PerfBuffers forPlacement(PerfBuffers b, bool inPlace) const {
    if (!inPlace) return b;
    b.send = c_.inPlaceSend(b);
    if (c_.inPlaceRecv != nullptr) b.recv = c_.inPlaceRecv(b);
    return b;
  }

  bool measure(PerfBuffers base, bool inPlace, Measurement* m) {
    PerfBuffers b = forPlacement(base, inPlace);
    for (int i = 0; i < o_.warmup; ++i) FW_CHECK(c_.run(b));
    if (!synchronized()) return false;
    if (!warmedUp_) {
      warmedUp_ = true;
      auto batch = [&] {
        for (int i = 0; i < std::max(o_.warmup, 1); ++i) FW_CHECK(c_.run(b));
        return synchronized();
      };
      // A sum of rank 0's 1 or 0 and zeros: exact, the same on every rank.
      auto agree = [&](bool wanted, bool* more) {
        double mine = wanted ? 1 : 0, any = 0;
        FW_CHECK(fwAllReduce(&mine, &any, 1, fwFloat64, fwSum, comm_, nullptr));
        *more = any > 0;
        return true;
      };
      if (!warmUpFirstSize(rank_, batch, agree)) return false;
    }
    FW_CHECK(fwBarrier(comm_, nullptr));
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters; ++i) FW_CHECK(c_.run(b));
    auto tCalls = std::chrono::steady_clock::now();
    if (!synchronized()) return false;
    auto t1 = std::chrono::steady_clock::now();
    double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / o_.iters;
    if (!combineTime(us, &m->timeUs)) return false;
    double callUs = std::chrono::duration<double, std::micro>(tCalls - t0).count() / o_.iters;
    FW_CHECK(fwAllReduce(&callUs, &m->callUs, 1, fwFloat64, fwMax, comm_, nullptr));
    if (o_.check) {
      ++seed_;
      // The same placement in the host mirrors (the buffers themselves for host memory).
      PerfBuffers mirror = base;
      mirror.send = hostSend_;
      mirror.recv = hostRecv_;
      mirror = forPlacement(mirror, inPlace);
      const size_t es = check::elementSize(b.datatype);
      const size_t sendBytes = c_.sendElements(b.count, nranks_) * es;
      const size_t recvBytes = c_.recvElements(b.count, nranks_) * es;
      const bool mirrored = hostSend_ != send_;
      c_.fillInput(mirror, seed_);
      if (mirrored && (!copyToBuffer(o_.memory, send_, hostSend_, sendBytes) ||
                       !copyToBuffer(o_.memory, recv_, hostRecv_, recvBytes))) {
        return failed("copying the input to the device");
      }
      FW_CHECK(c_.run(b));
      if (!synchronized()) return false;
      if (mirrored && !copyFromBuffer(o_.memory, hostRecv_, recv_, recvBytes)) {
        return failed("copying the result from the device");
      }
      size_t compare = c_.fillExpected(mirror, expected_, seed_);
      if (corruptForTest_ && compare > 0) check::corruptFirst(mirror.recv, b.datatype);
      if (o_.compressed()) {
        // Compression is lossy: its error against the exact result, over every rank's elements.
        const check::SquaredError mine = check::squaredError(mirror.recv, expected_, b.datatype, compare);
        double sums[2] = {mine.error, mine.reference}, total[2] = {0, 0};
        FW_CHECK(fwAllReduce(sums, total, 2, fwFloat64, fwSum, comm_, nullptr));
        m->error = total[1] > 0 ? std::sqrt(total[0] / total[1]) : std::sqrt(total[0]);
        if (!std::isfinite(m->error)) m->wrong = compare;  // a NaN or Inf result fails the run
        return true;
      }
      uint64_t wrong = check::countWrong(mirror.recv, expected_, b.datatype, compare);
      FW_CHECK(fwAllReduce(&wrong, &m->wrong, 1, fwUint64, fwSum, comm_, nullptr));
    }
    return true;
  }

  bool synchronized() { return synchronize(o_.memory) || failed("waiting for the device"); }

  bool failed(const char* what) const {
    std::fprintf(stderr, "%s: rank %d: %s failed\n", c_.name, rank_, what);
    return false;
  }

  bool combineTime(double mine, double* out) {
    static const fwRedOp_t kOps[] = {fwSum, fwSum, fwMin, fwMax};
    double combined = 0;
    FW_CHECK(fwAllReduce(&mine, &combined, 1, fwFloat64, kOps[o_.average], comm_, nullptr));
    if (o_.average == 1) combined /= nranks_;
    if (o_.average == 0) {
      combined = mine;
      FW_CHECK(fwBroadcast(&combined, &combined, 1, fwFloat64, 0, comm_, nullptr));
    }
    *out = combined;
    return true;
  }

  const PerfCollective& c_;
  const Options& o_;
  std::vector<Row> rows_;
  fwComm_t comm_;
  int rank_, nranks_;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  void* expected_ = nullptr;
  void* hostSend_ = nullptr;  // host mirrors of device buffers, or the buffers themselves
  void* hostRecv_ = nullptr;
  size_t sendBytesCap_ = 0, recvBytesCap_ = 0;
  int seed_ = 0;
  bool warmedUp_ = false;  // the first size's longer warm-up (first_size_warmup.h) is done
  // FAIRWAY_PERF_TEST_CORRUPT=1: spoil one received element before each
  // check, so a test can see that a wrong result fails the run.
  const bool corruptForTest_ = std::getenv("FAIRWAY_PERF_TEST_CORRUPT") != nullptr &&
                               std::string(std::getenv("FAIRWAY_PERF_TEST_CORRUPT")) == "1";
};

// -J: the same rows and summary as the table, for scripts and plots.
bool writeJson(const std::string& path, const PerfCollective& c, const Options& o, int nranks,
               const std::vector<Row>& rows) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "%s: cannot write %s: %s\n", c.name, path.c_str(), std::strerror(errno));
    return false;
  }
  std::fprintf(f, "{\n  \"benchmark\": \"%s\",\n  \"library\": \"Fairway %d.%d.%d\",\n  \"ranks\": %d,\n",
               c.name, FAIRWAY_MAJOR, FAIRWAY_MINOR, FAIRWAY_PATCH, nranks);
  std::fprintf(f, "  \"iters\": %d,\n  \"warmup\": %d,\n  \"check\": %d,\n  \"busbw_factor\": %.6f,\n  \"rows\": [",
               o.iters, o.warmup, o.check, c.busFactor(nranks));
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(f, "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", \"root\": %d",
                 i ? "," : "", r.bytes, r.count, datatypeName(r.type), c.usesOp ? opName(r.op) : "none", r.root);
    for (int p = 0; p < 2; ++p) {
      const char* key = p == 0 ? "out_of_place" : "in_place";
      if (p == 1 && !r.hasInPlace) {
        std::fprintf(f, ", \"%s\": null", key);
        continue;
      }
      std::fprintf(f,
                   ", \"%s\": {\"time_us\": %.3f, \"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, \"call_us\": %.3f, "
                   "\"wrong\": %llu",
                   key, r.timeUs[p], r.algbw[p], r.busbw[p], r.callUs[p], static_cast<unsigned long long>(r.wrong[p]));
      if (o.compressed()) std::fprintf(f, ", \"relative_l2_error\": %.6e", r.error[p]);
      std::fprintf(f, "}");
    }
    std::fprintf(f, "}");
  }
  std::fprintf(f, "\n  ],\n  \"avg_busbw_gbps\": %.6f,\n  \"wrong\": %llu\n}\n", averageBusbw(rows),
               static_cast<unsigned long long>(wrongValues(rows)));
  return std::fclose(f) == 0;
}

void printHeader(const PerfCollective& c, const Options& o, int nranks) {
  std::printf("# %s: Fairway %d.%d.%d, %d ranks, minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: %d "
              "validation: %d\n#\n",
              c.name, FAIRWAY_MAJOR, FAIRWAY_MINOR, FAIRWAY_PATCH, nranks, o.minBytes, o.maxBytes,
              o.stepFactor > 1 ? (std::to_string(o.stepFactor) + "(factor)").c_str()
                               : (std::to_string(o.stepBytes) + "(bytes)").c_str(),
              o.warmup, o.iters, o.check);
  if (o.compressed()) {
    std::printf("# compression: %s%s; busbw counts the uncompressed size; #wrong shows the relative L2 error "
                "against the full-precision result\n#\n",
                compressionName(o.compression.kind),
                o.compression.kind == fwCompressInt8 || o.compression.kind == fwCompressInt4
                    ? (", blocks of " + std::to_string(o.compression.blockSize ? o.compression.blockSize : 256)).c_str()
                    : "");
  }
  std::printf("#%70s%42s\n", "out-of-place", "in-place");
  std::printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type",
              "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "",
              "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  std::fflush(stdout);
}

}  // namespace

int runPerf(int argc, char** argv, const PerfCollective& collective) {
  Options o;
  if (!parseOptions(argc, argv, collective.usesOp, &o)) {
    usage(argv[0]);
    return 2;
  }
  if (o.compressed() && !collective.compresses) {
    std::fprintf(stderr, "%s: -q: this collective has no compressed form (allreduce, reduce-scatter and allgather "
                         "have)\n", collective.name);
    return 2;
  }
  std::string noDevice;
  if (o.memory == Memory::Cuda && !selectDevice(&noDevice)) {
    std::fprintf(stderr, "%s: -m cuda: %s\n", collective.name, noDevice.c_str());
    return 2;
  }
  fwComm_t comm = nullptr;
  if (fwCommInitFromEnv(&comm) != fwSuccess) {
    std::fprintf(stderr, "%s: cannot create the communicator: %s\n", collective.name, fwGetLastErrorMessage());
    return 1;
  }
  int rank = 0, nranks = 1;
  fwCommUserRank(comm, &rank);
  fwCommCount(comm, &nranks);
  if (collective.usesRoot && o.root >= nranks) {
    std::fprintf(stderr, "%s: -r %d is not a rank of %d\n", collective.name, o.root, nranks);
    fwCommDestroy(comm);
    return 2;
  }
  if (o.memory == Memory::Cuda && nranks < collective.minRanksOnDevice) {
    std::fprintf(stderr, "%s: -m cuda needs %d ranks or more: %s\n", collective.name, collective.minRanksOnDevice,
                 collective.whyMinRanksOnDevice);
    fwCommDestroy(comm);
    return 2;
  }
  if (rank == 0) printHeader(collective, o, nranks);

  bool ok;
  uint64_t wrong = 0;
  {
    Sweep sweep(collective, o, comm, rank, nranks);
    ok = sweep.allocate() && sweep.run();
    wrong = wrongValues(sweep.rows());
    if (ok && rank == 0 && !o.jsonPath.empty()) ok = writeJson(o.jsonPath, collective, o, nranks, sweep.rows());
    if (ok && rank == 0) {
      rusage usage{};
      getrusage(RUSAGE_SELF, &usage);
      std::printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(wrong),
                  wrong ? "FAILED" : "OK");
      std::printf("# Avg bus bandwidth    : %g \n", averageBusbw(sweep.rows()));
      std::printf("# Peak RSS (rank 0)    : %.1f MiB\n#\n", usage.ru_maxrss / 1024.0);
    }
  }
  fwResult_t destroyed = fwCommDestroy(comm);
  if (destroyed != fwSuccess) {
    std::fprintf(stderr, "%s: fwCommDestroy: %s\n", collective.name, fwGetLastErrorMessage());
  }
  return ok && wrong == 0 && destroyed == fwSuccess ? 0 : 1;
}

}  // namespace fairway::perf
