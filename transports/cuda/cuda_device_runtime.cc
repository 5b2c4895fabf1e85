// The CUDA runtime behind the DeviceRuntime interface. cudart is linked
// statically, so the plugin needs only the driver (libcuda) at run time;
// without a driver or a GPU, create() says so and the core treats every
// buffer as host memory.
#include <cuda.h>  // types and flags of cuStreamWaitValue32 only: it is reached through cudart
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "transports/cuda/cuda_quantize_kernels.h"
#include "transports/cuda/cuda_reduce_kernels.h"
#include "transports/device_runtime.h"

namespace fairway {
namespace {

Status cudaFailure(const char* what, cudaError_t error) {
  return Status(fwSystemError, std::string("cuda: ") + what + ": " + cudaGetErrorString(error));
}

using StreamWaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

// The driver's cuStreamWaitValue32 through cudart (no link to libcuda), or
// null where the driver lacks it.
StreamWaitValue32 driverStreamWaitValue32() {
  static StreamWaitValue32 entry = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &function, 12000, cudaEnableDefault, &found);
    return e == cudaSuccess && found == cudaDriverEntryPointSuccess ? reinterpret_cast<StreamWaitValue32>(function)
                                                                    : nullptr;
  }();
  return entry;
}

// The fallback wait: a host function on the stream that returns once the
// flag is set. It holds CUDA's callback thread meanwhile, which delays
// other host functions in the process; stream memory operations do not.
struct HostWait {
  const uint32_t* flag;
  uint32_t value;
};
void CUDART_CB waitOnHost(void* argument) {
  auto* wait = static_cast<HostWait*>(argument);
  while (static_cast<int32_t>(__atomic_load_n(wait->flag, __ATOMIC_ACQUIRE) - wait->value) < 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  delete wait;
}

class CudaDeviceRuntime final : public DeviceRuntime {
 public:
  explicit CudaDeviceRuntime(int devices) : devices_(devices) {}

  int deviceCount() const override { return devices_; }
  bool memoryIsCuda() const override { return true; }

  Status currentDevice(int* ordinal, std::string* pciBusId) override {
    cudaError_t e = cudaGetDevice(ordinal);
    if (e != cudaSuccess) return cudaFailure("cudaGetDevice", e);
    char id[32] = {};
    e = cudaDeviceGetPCIBusId(id, sizeof(id), *ordinal);
    if (e != cudaSuccess) return cudaFailure("cudaDeviceGetPCIBusId", e);
    // CUDA prints hex digits in upper case, hwloc in lower case.
    std::string text = id;
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    *pciBusId = text;
    return Status::ok();
  }

  Status setDevice(int ordinal) override {
    cudaError_t e = cudaSetDevice(ordinal);
    return e == cudaSuccess ? Status::ok() : cudaFailure("cudaSetDevice", e);
  }

  MemoryType memoryTypeOf(const void* pointer, int* device) override {
    cudaPointerAttributes attr{};
    cudaError_t e = cudaPointerGetAttributes(&attr, pointer);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // an unknown pointer is host memory; clear the sticky error
      return MemoryType::Host;
    }
    if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) {
      *device = attr.device;
      return MemoryType::Cuda;
    }
    return MemoryType::Host;
  }

  Status allocatePinned(size_t bytes, void** out) override {
    cudaError_t e = cudaMallocHost(out, bytes);
    return e == cudaSuccess ? Status::ok() : cudaFailure("cudaMallocHost", e);
  }
  void freePinned(void* pointer) override { (void)cudaFreeHost(pointer); }

  Status allocateDevice(size_t bytes, void** out) override {
    cudaError_t e = cudaMalloc(out, bytes);
    return e == cudaSuccess ? Status::ok() : cudaFailure("cudaMalloc", e);
  }
  void freeDevice(void* pointer) override { (void)cudaFree(pointer); }

  Status copyAsync(void* dst, const void* src, size_t bytes, void* stream) override {
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream));
    return e == cudaSuccess ? Status::ok() : cudaFailure("cudaMemcpyAsync", e);
  }

  Status combineAsync(void* dst, const void* a, const void* b, size_t count, fwDataType_t datatype, fwRedOp_t op,
                      void* stream) override {
    cudaError_t e = cuda::launchCombine(dst, a, b, count, datatype, op, static_cast<cudaStream_t>(stream));
    return e == cudaSuccess ? Status::ok() : cudaFailure("the reduction kernel", e);
  }
  Status divideAsync(void* buf, size_t count, fwDataType_t datatype, int divisor, void* stream) override {
    cudaError_t e = cuda::launchDivide(buf, count, datatype, divisor, static_cast<cudaStream_t>(stream));
    return e == cudaSuccess ? Status::ok() : cudaFailure("the average's division kernel", e);
  }
  Status codecAsync(const kernels::CodecStep& step, void* stream) override {
    cudaError_t e = cuda::launchCodecStep(step, static_cast<cudaStream_t>(stream));
    return e == cudaSuccess ? Status::ok() : cudaFailure("a compression kernel", e);
  }
  Status zeroAsync(void* dst, size_t bytes, void* stream) override {
    cudaError_t e = cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(stream));
    return e == cudaSuccess ? Status::ok() : cudaFailure("cudaMemsetAsync", e);
  }

  // Through an event, not cudaStreamQuery: a blocking stream's implicit wait
  // on the legacy default stream (a cudaMemcpy between device buffers made
  // just before the call, say) is added only to work enqueued on it, so a
  // query of an idle stream reports done while that copy still runs. An
  // event per call (a microsecond or two, beside a staged collective's
  // copies) keeps this safe from any thread and on any device.
  Status synchronize(void* stream, int64_t timeoutMs) override {
    cudaEvent_t done = nullptr;
    cudaError_t e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    if (e != cudaSuccess) return cudaFailure("cudaEventCreateWithFlags", e);
    e = cudaEventRecord(done, static_cast<cudaStream_t>(stream));
    Status waited = e == cudaSuccess ? waitUntilDone([&] { return cudaEventQuery(done); }, "the stream's work", timeoutMs)
                                     : cudaFailure("cudaEventRecord", e);
    (void)cudaEventDestroy(done);
    return waited;
  }

  Status createStream(void** out) override {
    cudaStream_t stream = nullptr;
    cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    *out = stream;
    return e == cudaSuccess ? Status::ok() : cudaFailure("cudaStreamCreateWithFlags", e);
  }
  void destroyStream(void* stream) override { (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream)); }

  Status createEvent(void** out) override {
    cudaEvent_t event = nullptr;
    cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    *out = event;
    return e == cudaSuccess ? Status::ok() : cudaFailure("cudaEventCreateWithFlags", e);
  }
  void destroyEvent(void* event) override { (void)cudaEventDestroy(static_cast<cudaEvent_t>(event)); }

  Status recordEvent(void* event, void* stream) override {
    cudaError_t e = cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream));
    return e == cudaSuccess ? Status::ok() : cudaFailure("cudaEventRecord", e);
  }
  Status waitEvent(void* event, int64_t timeoutMs) override {
    return waitUntilDone([&] { return cudaEventQuery(static_cast<cudaEvent_t>(event)); }, "a staging copy",
                         timeoutMs);
  }

  // Mapped, portable pinned memory: every device reads it in place.
  Status allocateFlags(size_t count, uint32_t** out) override {
    void* memory = nullptr;
    cudaError_t e = cudaHostAlloc(&memory, std::max<size_t>(count, 1) * sizeof(uint32_t),
                                  cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess) return cudaFailure("cudaHostAlloc for stream flags", e);
    std::memset(memory, 0, std::max<size_t>(count, 1) * sizeof(uint32_t));
    *out = static_cast<uint32_t*>(memory);
    return Status::ok();
  }

  // cuStreamWaitValue32 where the driver has stream memory operations: the
  // GPU itself polls the flag, no thread is held. Otherwise a host function.
  Status streamWaitFlag(void* stream, uint32_t* flag, uint32_t value) override {
    StreamWaitValue32 wait = hostWaits_.load() ? nullptr : driverStreamWaitValue32();
    if (wait != nullptr) {
      void* devicePointer = nullptr;
      cudaError_t e = cudaHostGetDevicePointer(&devicePointer, flag, 0);
      if (e != cudaSuccess) return cudaFailure("cudaHostGetDevicePointer of a stream flag", e);
      CUresult r = wait(static_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(devicePointer), value,
                        CU_STREAM_WAIT_VALUE_GEQ);
      if (r == CUDA_SUCCESS) return Status::ok();
      if (r != CUDA_ERROR_NOT_SUPPORTED) {
        return Status(fwSystemError, "cuda: cuStreamWaitValue32 failed with CUresult " + std::to_string(r));
      }
      hostWaits_.store(true);
    }
    cudaError_t e = cudaLaunchHostFunc(static_cast<cudaStream_t>(stream), waitOnHost, new HostWait{flag, value});
    return e == cudaSuccess ? Status::ok() : cudaFailure("cudaLaunchHostFunc", e);
  }

  void useHostFunctionWaits() override { hostWaits_.store(true); }

  void setFlag(uint32_t* flag, uint32_t value) override { __atomic_store_n(flag, value, __ATOMIC_RELEASE); }

  const char* streamWaitMethod() const override {
    return driverStreamWaitValue32() != nullptr && !hostWaits_.load() ? "cuStreamWaitValue32"
                                                                      : "a host function (cudaLaunchHostFunc)";
  }

 private:
  // Polls query until it stops reporting cudaErrorNotReady, yielding the
  // core between polls; CUDA's own synchronize calls have no time limit.
  template <typename Query>
  static Status waitUntilDone(Query query, const char* what, int64_t timeoutMs) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
    for (;;) {
      cudaError_t e = query();
      if (e == cudaSuccess) return Status::ok();
      if (e != cudaErrorNotReady) return cudaFailure(what, e);
      if (std::chrono::steady_clock::now() >= deadline) {
        return Status(fwTimeout, std::string("cuda: ") + what + " did not finish within FAIRWAY_TIMEOUT_MS=" +
                                     std::to_string(timeoutMs) + " ms");
      }
      std::this_thread::yield();
    }
  }

  int devices_;
  std::atomic<bool> hostWaits_{false};  // the driver refused stream memory operations
};

Status createCudaRuntime(std::unique_ptr<DeviceRuntime>* out) {
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess) {
    return Status(fwNotAvailable, std::string("no CUDA device: cudaGetDeviceCount: ") + cudaGetErrorString(e));
  }
  if (devices == 0) return Status(fwNotAvailable, "no CUDA device: the driver reports none");
  *out = std::make_unique<CudaDeviceRuntime>(devices);
  return Status::ok();
}

const DeviceRuntimePlugin kCudaRuntimePlugin{kDeviceRuntimeAbiVersion, createCudaRuntime};

}  // namespace
}  // namespace fairway

extern "C" __attribute__((visibility("default"))) const fairway::DeviceRuntimePlugin* fairwayDeviceRuntime() {
  return &fairway::kCudaRuntimePlugin;
}
