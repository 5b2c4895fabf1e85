// A device runtime without a device, for tests: "device" memory is host
// memory from an arena this runtime hands out and recognises, and streams
// are threads that run their work in order, later than it was enqueued, as
// a GPU's would. With it, every device-buffer branch of the core (staging,
// UCX on device memory, stream ordering, asynchronous errors) runs on a
// machine without a GPU. Loaded only when FAIRWAY_DEVICE_RUNTIME=
// host-emulated asks for it; the CUDA plugin is the runtime users get.
//
// Tests reach it as the core does, through the DeviceRuntime interface
// (tests/multirank/test_device.h): they hold a stream back with a flag to
// see that a call returned before its work ran.
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/reducer.h"
#include "transports/device_runtime.h"
#include "transports/emulated/emulated_native_collectives.h"

namespace fairway {
namespace {

// Work on emulated streams, and the one condition every waiter waits on: a
// wait re-checks its own predicate whenever any piece of work finishes.
class Streams {
 public:
  struct Stream {
    std::deque<std::function<void()>> queue;
    std::thread worker;
  };

  static Streams& instance() {
    static Streams* streams = new Streams;  // never destroyed: workers may outlive static destructors
    return *streams;
  }

  Stream* create() {
    auto* stream = new Stream;
    std::lock_guard<std::mutex> lock(mutex_);
    stream->worker = std::thread([this, stream] { work(stream); });
    stream->worker.detach();
    return stream;
  }

  // The stream is retired once its queued work has run.
  void destroy(Stream* stream) {
    enqueue(stream, [this, stream] {
      std::lock_guard<std::mutex> lock(mutex_);
      retired_.push_back(stream);
    });
  }

  // The default stream (a null handle), made on first use.
  Stream* resolve(void* handle) {
    if (handle != nullptr) return static_cast<Stream*>(handle);
    std::call_once(defaultOnce_, [this] { default_ = create(); });
    return default_;
  }

  void enqueue(Stream* stream, std::function<void()> work) {
    std::lock_guard<std::mutex> lock(mutex_);
    stream->queue.push_back(std::move(work));
    changed_.notify_all();
  }

  // Waits until done() holds (checked under the lock) or the deadline passes.
  template <typename Done>
  bool waitUntil(Done done, std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_until(lock, deadline, done);
  }
  template <typename Done>
  void waitUntilDone(Done done) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, done);
  }

  std::mutex& mutex() { return mutex_; }

  // A flag write that wakes the streams waiting on it.
  void setAndNotify(uint32_t* flag, uint32_t value) {
    std::lock_guard<std::mutex> lock(mutex_);
    *flag = value;
    changed_.notify_all();
  }

 private:
  void work(Stream* stream) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return !stream->queue.empty(); });
      std::function<void()> next = std::move(stream->queue.front());
      stream->queue.pop_front();
      lock.unlock();
      next();
      lock.lock();
      changed_.notify_all();
      for (auto it = retired_.begin(); it != retired_.end(); ++it) {
        if (*it == stream) {
          retired_.erase(it);
          lock.unlock();
          delete stream;
          return;
        }
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::once_flag defaultOnce_;
  Stream* default_ = nullptr;
  std::deque<Stream*> retired_;
};

// An event completes when the stream reaches the point where it was
// recorded; a never-recorded event counts as complete, as in CUDA. Its
// state is shared with the records still queued, so the handle may be
// destroyed before they run. Fields are guarded by the streams' mutex.
struct EventState {
  uint64_t recorded = 0;   // records so far
  uint64_t completed = 0;  // the last record the stream reached
};
struct Event {
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
};

Status synchronizeStream(void* stream, int64_t timeoutMs);

// Allocations handed out as device memory, by start address.
class Arena {
 public:
  Status allocate(size_t bytes, void** out) {
    // 256-byte alignment, as cudaMalloc gives; at least one byte, so every
    // allocation has its own address.
    const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
    void* memory = std::aligned_alloc(256, rounded);
    if (memory == nullptr) {
      return Status(fwSystemError, "host-emulated device: out of memory allocating " + std::to_string(bytes) + " bytes");
    }
    std::lock_guard<std::mutex> lock(mutex_);
    blocks_[reinterpret_cast<uintptr_t>(memory)] = rounded;
    *out = memory;
    return Status::ok();
  }
  void free(void* pointer) {
    if (pointer == nullptr) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (blocks_.erase(reinterpret_cast<uintptr_t>(pointer)) == 0) return;  // not ours: leave it
    }
    std::free(pointer);
  }
  bool contains(const void* pointer) {
    const auto address = reinterpret_cast<uintptr_t>(pointer);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.upper_bound(address);
    if (it == blocks_.begin()) return false;
    --it;
    return address < it->first + it->second;
  }

 private:
  std::mutex mutex_;
  std::map<uintptr_t, size_t> blocks_;
};

Arena& deviceArena() {
  static Arena* arena = new Arena;
  return *arena;
}

Status timedOut(const char* what, int64_t timeoutMs) {
  return Status(fwTimeout, std::string("host-emulated device: ") + what + " did not finish within FAIRWAY_TIMEOUT_MS=" +
                               std::to_string(timeoutMs) + " ms");
}

class EmulatedDeviceRuntime final : public DeviceRuntime {
 public:
  int deviceCount() const override { return 1; }
  bool memoryIsCuda() const override { return false; }

  // One device per process, named after it, so ranks on one host look like
  // ranks with a GPU each.
  Status currentDevice(int* ordinal, std::string* pciBusId) override {
    *ordinal = 0;
    *pciBusId = "emulated-" + std::to_string(getpid());
    return Status::ok();
  }
  Status setDevice(int ordinal) override {
    if (ordinal != 0) return Status(fwInvalidArgument, "host-emulated device: only device 0 exists");
    return Status::ok();
  }

  MemoryType memoryTypeOf(const void* pointer, int* device) override {
    if (!deviceArena().contains(pointer)) return MemoryType::Host;
    *device = 0;
    return MemoryType::Cuda;
  }

  Status allocatePinned(size_t bytes, void** out) override {
    *out = std::malloc(std::max<size_t>(bytes, 1));
    if (*out == nullptr) return Status(fwSystemError, "host-emulated device: out of host memory");
    return Status::ok();
  }
  void freePinned(void* pointer) override { std::free(pointer); }
  Status allocateDevice(size_t bytes, void** out) override { return deviceArena().allocate(bytes, out); }
  void freeDevice(void* pointer) override { deviceArena().free(pointer); }

  Status copyAsync(void* dst, const void* src, size_t bytes, void* stream) override {
    if (bytes == 0) return Status::ok();
    Streams& s = Streams::instance();
    s.enqueue(s.resolve(stream), [dst, src, bytes] { std::memmove(dst, src, bytes); });
    return Status::ok();
  }

  // The host's own loops, run by the stream's thread: the same bits as a
  // host reduction, later than the call, like a kernel.
  Status combineAsync(void* dst, const void* a, const void* b, size_t count, fwDataType_t datatype, fwRedOp_t op,
                      void* stream) override {
    if (count == 0) return Status::ok();
    Reducer reducer(datatype, op, 1);
    Streams& s = Streams::instance();
    s.enqueue(s.resolve(stream), [reducer, dst, a, b, count] { reducer.combine(dst, a, b, count); });
    return Status::ok();
  }
  Status divideAsync(void* buf, size_t count, fwDataType_t datatype, int divisor, void* stream) override {
    if (count == 0) return Status::ok();
    Reducer reducer(datatype, fwAvg, divisor);
    Streams& s = Streams::instance();
    s.enqueue(s.resolve(stream), [reducer, buf, count] { reducer.finalize(buf, count); });
    return Status::ok();
  }

  Status codecAsync(const kernels::CodecStep& step, void* stream) override {
    if (step.count == 0) return Status::ok();
    Streams& s = Streams::instance();
    s.enqueue(s.resolve(stream), [step] { kernels::runOnCpu(step); });
    return Status::ok();
  }
  Status zeroAsync(void* dst, size_t bytes, void* stream) override {
    if (bytes == 0) return Status::ok();
    Streams& s = Streams::instance();
    s.enqueue(s.resolve(stream), [dst, bytes] { std::memset(dst, 0, bytes); });
    return Status::ok();
  }

  Status synchronize(void* stream, int64_t timeoutMs) override { return synchronizeStream(stream, timeoutMs); }

  Status createStream(void** out) override {
    *out = Streams::instance().create();
    return Status::ok();
  }
  void destroyStream(void* stream) override {
    if (stream != nullptr) Streams::instance().destroy(static_cast<Streams::Stream*>(stream));
  }

  Status createEvent(void** out) override {
    *out = new Event;
    return Status::ok();
  }
  void destroyEvent(void* event) override { delete static_cast<Event*>(event); }

  Status recordEvent(void* event, void* stream) override {
    std::shared_ptr<EventState> state = static_cast<Event*>(event)->state;
    Streams& s = Streams::instance();
    uint64_t record;
    {
      std::lock_guard<std::mutex> lock(s.mutex());
      record = ++state->recorded;
    }
    s.enqueue(s.resolve(stream), [state, record] {
      std::lock_guard<std::mutex> lock(Streams::instance().mutex());
      if (state->completed < record) state->completed = record;
    });
    return Status::ok();
  }

  Status allocateFlags(size_t count, uint32_t** out) override {
    *out = static_cast<uint32_t*>(std::calloc(std::max<size_t>(count, 1), sizeof(uint32_t)));
    if (*out == nullptr) return Status(fwSystemError, "host-emulated device: out of host memory for flags");
    return Status::ok();
  }

  // The stream's thread sleeps until setFlag satisfies it: no timeout, as
  // a GPU stream waiting on a value has none.
  Status streamWaitFlag(void* stream, uint32_t* flag, uint32_t value) override {
    Streams& s = Streams::instance();
    s.enqueue(s.resolve(stream), [flag, value] {
      Streams::instance().waitUntilDone([&] { return static_cast<int32_t>(*flag - value) >= 0; });
    });
    return Status::ok();
  }

  void setFlag(uint32_t* flag, uint32_t value) override { Streams::instance().setAndNotify(flag, value); }

  const char* streamWaitMethod() const override { return "host-emulated stream thread"; }

  const NativeCollectivesEntry* nativeCollectives() override {
    return emulatedNativeCollectives([](void* stream, std::function<void()> work) {
      Streams& s = Streams::instance();
      s.enqueue(s.resolve(stream), std::move(work));
    });
  }

  Status waitEvent(void* event, int64_t timeoutMs) override {
    std::shared_ptr<EventState> state = static_cast<Event*>(event)->state;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
    Streams& s = Streams::instance();
    uint64_t target;
    {
      std::lock_guard<std::mutex> lock(s.mutex());
      target = state->recorded;
    }
    if (!s.waitUntil([&] { return state->completed >= target; }, deadline)) return timedOut("an event", timeoutMs);
    return Status::ok();
  }
};

// Everything enqueued on the stream so far has run.
Status synchronizeStream(void* stream, int64_t timeoutMs) {
  auto done = std::make_shared<bool>(false);
  Streams& s = Streams::instance();
  s.enqueue(s.resolve(stream), [done] {
    std::lock_guard<std::mutex> lock(Streams::instance().mutex());
    *done = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  if (!s.waitUntil([&] { return *done; }, deadline)) return timedOut("the stream's work", timeoutMs);
  return Status::ok();
}

Status createEmulatedRuntime(std::unique_ptr<DeviceRuntime>* out) {
  *out = std::make_unique<EmulatedDeviceRuntime>();
  return Status::ok();
}

const DeviceRuntimePlugin kEmulatedRuntimePlugin{kDeviceRuntimeAbiVersion, createEmulatedRuntime};

}  // namespace
}  // namespace fairway

extern "C" __attribute__((visibility("default"))) const fairway::DeviceRuntimePlugin* fairwayDeviceRuntime() {
  return &fairway::kEmulatedRuntimePlugin;
}

