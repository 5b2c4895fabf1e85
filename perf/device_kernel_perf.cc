// device_kernel_perf: the device runtime's reduction and compression
// kernels (what algorithms run on device memory) against a device-to-device
// copy of the same buffers, per size. Bandwidth counts the bytes a kernel
// must read plus the bytes it must write, each once, so a kernel that moves
// bytes as fast as the copy shows 100%. Inputs are random (never zeros),
// and each size rotates through enough buffer sets to exceed the GPU's
// cache, so repeated runs measure memory rather than L2.
//   device_kernel_perf [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-J FILE]
// (sizes are float32 input bytes; defaults 1M..256M, factor 4, 20 iterations)
// Runs on the runtime FAIRWAY_DEVICE_RUNTIME names: the CUDA plugin on a
// GPU; host-emulated on a machine without one (CPU kernels on a stream
// thread: the program's own check, not a GPU figure).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "api/device_runtime_access.h"
#include "core/compression.h"
#include "core/command_line_numbers.h"

using namespace fairway;

namespace {

constexpr int64_t kWaitMs = 600000;
constexpr int kRepeats = 5;             // timed windows per kernel and size; the median is reported
constexpr size_t kRotationBytes = size_t{512} << 20;  // each size cycles through this much input, at most 16 sets

struct Options {
  size_t minBytes = size_t{1} << 20, maxBytes = size_t{256} << 20;
  double factor = 4;
  int iters = 20;
  std::string json;
};

bool parse(int argc, char** argv, Options* o) {
  int c;
  while ((c = getopt(argc, argv, "b:e:f:n:J:")) != -1) {
    double v = 0;
    const char* end = nullptr;
    switch (c) {
      case 'b': if (!fairway::parseSize(optarg, &o->minBytes)) return false; break;
      case 'e': if (!fairway::parseSize(optarg, &o->maxBytes)) return false; break;
      case 'f':
        if (!fairway::parseLeadingNumber(optarg, &v, &end) || *end != '\0' || v <= 1) return false;
        o->factor = v;
        break;
      case 'n':
        if (!fairway::parseLeadingNumber(optarg, &v, &end) || *end != '\0' || v < 1 || v > 1e6) return false;
        o->iters = static_cast<int>(v);
        break;
      case 'J': o->json = optarg; break;
      default: return false;
    }
  }
  return optind == argc && o->minBytes >= 1024 && o->minBytes <= o->maxBytes;
}

// One kernel: what it is called, the bytes it reads plus writes for n
// float32 values, and how to enqueue it on set k of the buffers.
struct Kernel {
  const char* name;
  std::function<size_t(size_t n)> bytesMoved;
  std::function<Status(int set, size_t n)> enqueue;
};

struct BufferSet {
  void* input = nullptr;   // n float32 values (also read as 2n bf16)
  void* other = nullptr;   // a second input of the same size
  void* output = nullptr;  // as large as the input
  void* wire = nullptr;    // an int8 encoding of the input
};

class Bench {
 public:
  Bench(DeviceRuntime* device, const Options& o) : d_(device), o_(o) {}

  bool run() {
    Status created = d_->createStream(&stream_);
    if (!created.isOk()) return fail("creating a stream", created);
    std::vector<std::string> rows;
    std::printf("# device_kernel_perf: %d iterations, median of %d windows; GB/s counts bytes read + written\n",
                o_.iters, kRepeats);
    std::printf("#%11s  %-18s  %9s  %9s  %9s  %8s\n", "size(B)", "kernel", "time(us)", "GB/s", "copy GB/s",
                "of copy");
    bool ok = true;
    for (size_t bytes = o_.minBytes; ok; bytes = std::max(bytes + 1, static_cast<size_t>(bytes * o_.factor))) {
      bytes = std::min(bytes, o_.maxBytes);
      ok = measureSize(bytes, &rows);
      if (bytes == o_.maxBytes) break;
    }
    d_->destroyStream(stream_);
    if (ok && !o_.json.empty()) ok = writeJson(rows);
    return ok;
  }

 private:
  bool measureSize(size_t bytes, std::vector<std::string>* rows) {
    const size_t n = bytes / sizeof(float);
    const int sets = static_cast<int>(std::clamp<size_t>(kRotationBytes / bytes, 1, 16));
    if (!allocate(sets, n)) {
      release();
      return false;
    }
    Compression int8, int4;
    int8.kind = fwCompressInt8;
    int4.kind = fwCompressInt4;
    auto codec = [&](kernels::CodecStep::Op op, fwCompressKind_t format, int set, size_t count) {
      kernels::CodecStep step;
      step.op = op;
      step.format = format;
      step.blockSize = kDefaultCompressionBlock;
      step.count = count;
      const bool encode = op == kernels::CodecStep::Op::Encode;
      step.src = encode ? sets_[set].input : sets_[set].wire;
      step.dst = encode ? sets_[set].wire : sets_[set].output;
      return d_->codecAsync(step, stream_);
    };
    using Op = kernels::CodecStep::Op;
    const std::vector<Kernel> kernels = {
        {"copy", [](size_t m) { return 8 * m; },
         [&](int k, size_t m) { return d_->copyAsync(sets_[k].output, sets_[k].input, 4 * m, stream_); }},
        {"sum float32", [](size_t m) { return 12 * m; },
         [&](int k, size_t m) {
           return d_->combineAsync(sets_[k].output, sets_[k].input, sets_[k].other, m, fwFloat32, fwSum, stream_);
         }},
        {"sum bfloat16", [](size_t m) { return 12 * m; },  // 2m values of 2 bytes
         [&](int k, size_t m) {
           return d_->combineAsync(sets_[k].output, sets_[k].input, sets_[k].other, 2 * m, fwBfloat16, fwSum, stream_);
         }},
        {"int8 encode", [&](size_t m) { return 4 * m + int8.encodedBytes(m); },
         [&](int k, size_t m) { return codec(Op::Encode, fwCompressInt8, k, m); }},
        {"int8 decode-add", [&](size_t m) { return int8.encodedBytes(m) + 8 * m; },
         [&](int k, size_t m) { return codec(Op::DecodeAdd, fwCompressInt8, k, m); }},
        {"int4 encode", [&](size_t m) { return 4 * m + int4.encodedBytes(m); },
         [&](int k, size_t m) { return codec(Op::Encode, fwCompressInt4, k, m); }},
        {"int4 decode-add", [&](size_t m) { return int4.encodedBytes(m) + 8 * m; },
         [&](int k, size_t m) { return codec(Op::DecodeAdd, fwCompressInt4, k, m); }},
    };
    double copyGbps = 0;
    for (const Kernel& kernel : kernels) {
      double us = 0;
      Status st = time(kernel, sets, n, &us);
      if (!st.isOk()) return fail(kernel.name, st);
      const double gbps = static_cast<double>(kernel.bytesMoved(n)) / us / 1e3;
      if (std::strcmp(kernel.name, "copy") == 0) copyGbps = gbps;
      std::printf("%12zu  %-18s  %9.2f  %9.1f  %9.1f  %7.1f%%\n", bytes, kernel.name, us, gbps, copyGbps,
                  100 * gbps / copyGbps);
      char row[320];
      std::snprintf(row, sizeof(row),
                    "{\"size_bytes\": %zu, \"kernel\": \"%s\", \"time_us\": %.3f, \"gbps\": %.3f, "
                    "\"copy_gbps\": %.3f, \"percent_of_copy\": %.2f}",
                    bytes, kernel.name, us, gbps, copyGbps, 100 * gbps / copyGbps);
      rows->push_back(row);
    }
    std::fflush(stdout);
    release();
    return true;
  }

  // The median over kRepeats windows of o_.iters calls, rotating through the sets.
  Status time(const Kernel& kernel, int sets, size_t n, double* us) {
    for (int k = 0; k < sets; ++k) FW_RETURN_IF_ERROR(kernel.enqueue(k, n));  // warm-up: every set once
    FW_RETURN_IF_ERROR(d_->synchronize(stream_, kWaitMs));
    std::vector<double> windows;
    for (int r = 0; r < kRepeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < o_.iters; ++i) FW_RETURN_IF_ERROR(kernel.enqueue(i % sets, n));
      FW_RETURN_IF_ERROR(d_->synchronize(stream_, kWaitMs));
      windows.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
                        o_.iters);
    }
    std::sort(windows.begin(), windows.end());
    *us = windows[windows.size() / 2];
    return Status::ok();
  }

  bool allocate(int sets, size_t n) {
    std::mt19937 random(11);
    std::normal_distribution<float> gaussian(0.f, 2.f);
    std::vector<float> host(n);
    for (float& x : host) x = gaussian(random);
    sets_.assign(static_cast<size_t>(sets), BufferSet{});
    Status st;
    for (BufferSet& s : sets_) {
      for (void** p : {&s.input, &s.other, &s.output, &s.wire}) {
        if (st.isOk()) st = d_->allocateDevice(4 * n, p);
      }
      for (void* p : {s.input, s.other}) {
        if (st.isOk()) st = d_->copyAsync(p, host.data(), 4 * n, stream_);
      }
      for (void* p : {s.output, s.wire}) {
        if (st.isOk()) st = d_->zeroAsync(p, 4 * n, stream_);
      }
    }
    if (st.isOk()) st = d_->synchronize(stream_, kWaitMs);
    return st.isOk() || fail("preparing " + std::to_string(sets) + " sets of buffers of " + std::to_string(4 * n) +
                             " bytes", st);
  }

  void release() {
    for (BufferSet& s : sets_) {
      for (void* p : {s.input, s.other, s.output, s.wire}) {
        if (p != nullptr) d_->freeDevice(p);
      }
    }
    sets_.clear();
  }

  bool writeJson(const std::vector<std::string>& rows) const {
    FILE* f = std::fopen(o_.json.c_str(), "w");
    if (f == nullptr) return fail("writing " + o_.json, Status(fwSystemError, std::strerror(errno)));
    std::fprintf(f, "{\n  \"benchmark\": \"device_kernel_perf\",\n  \"iters\": %d,\n  \"rows\": [", o_.iters);
    for (size_t i = 0; i < rows.size(); ++i) std::fprintf(f, "%s\n    %s", i ? "," : "", rows[i].c_str());
    std::fprintf(f, "\n  ]\n}\n");
    return std::fclose(f) == 0;
  }

  static bool fail(const std::string& what, const Status& why) {
    std::fprintf(stderr, "device_kernel_perf: %s failed: %s\n", what.c_str(), why.message().c_str());
    return false;
  }

  DeviceRuntime* d_;
  const Options& o_;
  void* stream_ = nullptr;
  std::vector<BufferSet> sets_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    std::fprintf(stderr, "usage: %s [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-J FILE]  (MIN at least 1K)\n", argv[0]);
    return 2;
  }
  const char* why = nullptr;
  DeviceRuntime* device = fairwayProcessDeviceRuntime(&why);
  if (device == nullptr) {
    std::fprintf(stderr, "device_kernel_perf: no device runtime: %s\n", why);
    return 2;
  }
  return Bench(device, o).run() ? 0 : 1;
}
