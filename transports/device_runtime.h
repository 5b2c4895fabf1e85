// The CUDA runtime as the core needs it: which device a buffer lives on, and
// the copies that stage device buffers through pinned host memory when a
// transport cannot reach device memory. Loaded from a plugin
// (libfairway-device-cuda.so), so the core never links CUDA; without the
// plugin or a GPU every buffer is host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/quantize_kernels.h"
#include "core/status.h"
#include "fairway/fairway.h"
#include "transports/native_collectives.h"
#include "transports/transport.h"

namespace fairway {

constexpr int kDeviceRuntimeAbiVersion = 6;

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;

  virtual int deviceCount() const = 0;
  // Whether its device memory is CUDA memory (NCCL can reach it); the
  // host-emulated runtime of the tests says no.
  virtual bool memoryIsCuda() const = 0;
  // The calling thread's current device and its PCI bus id ("0000:17:00.0").
  virtual Status currentDevice(int* ordinal, std::string* pciBusId) = 0;
  virtual Status setDevice(int ordinal) = 0;
  // Host for pageable, pinned or unknown pointers; Cuda for device and
  // managed memory. *device gets the owning device for Cuda.
  virtual MemoryType memoryTypeOf(const void* pointer, int* device) = 0;

  virtual Status allocatePinned(size_t bytes, void** out) = 0;
  virtual void freePinned(void* pointer) = 0;
  // Memory on the current device (scratch of the hierarchical collectives).
  virtual Status allocateDevice(size_t bytes, void** out) = 0;
  virtual void freeDevice(void* pointer) = 0;
  // Stream-ordered copy between any two pointers.
  virtual Status copyAsync(void* dst, const void* src, size_t bytes, void* stream) = 0;
  // Stream-ordered reductions on device memory, for algorithms that run on
  // device buffers (UCX reaching device memory): dst[i] = a[i] op b[i]
  // (dst may be a or b; avg combines as a sum), and the division of avg.
  // Results are those of the host's loops (core/reduce_kernels.inc), bit for
  // bit but for NaN payloads (a GPU's arithmetic gives its canonical NaN):
  // integers wrap, 16-bit floats are computed in float32 and rounded to
  // nearest even, max/min keep a when neither compares greater.
  virtual Status combineAsync(void* dst, const void* a, const void* b, size_t count, fwDataType_t datatype,
                              fwRedOp_t op, void* stream) = 0;
  virtual Status divideAsync(void* buf, size_t count, fwDataType_t datatype, int divisor, void* stream) = 0;
  // Stream-ordered compression steps on device memory (compressed
  // collectives on device buffers), with the host kernels' results
  // (core/quantize_kernels.h), and zeroing.
  virtual Status codecAsync(const kernels::CodecStep& step, void* stream) = 0;
  virtual Status zeroAsync(void* dst, size_t bytes, void* stream) = 0;
  // Waits until everything enqueued on stream has run, and everything the
  // stream itself waits for (the legacy default stream's work, for a
  // blocking stream), or fails with fwTimeout after timeoutMs (work stuck
  // behind a peer that never comes).
  virtual Status synchronize(void* stream, int64_t timeoutMs) = 0;
  // A private stream for staging copies, and events to order it.
  virtual Status createStream(void** out) = 0;
  virtual void destroyStream(void* stream) = 0;
  virtual Status createEvent(void** out) = 0;
  virtual void destroyEvent(void* event) = 0;
  virtual Status recordEvent(void* event, void* stream) = 0;
  virtual Status waitEvent(void* event, int64_t timeoutMs) = 0;  // the host waits, bounded like synchronize

  // How a stream waits for a host thread: flags are words of host memory
  // that streams read and host threads write. allocateFlags gives `count`
  // zeroed flags; they are never freed while a stream may still read them.
  virtual Status allocateFlags(size_t count, uint32_t** out) = 0;
  // Work enqueued on stream after this runs once (int32_t)(*flag - value)
  // >= 0: a cyclic greater-or-equal, so a counter may wrap.
  virtual Status streamWaitFlag(void* stream, uint32_t* flag, uint32_t value) = 0;
  // Sets the flag, after every host write before it; visible to waiting streams.
  virtual void setFlag(uint32_t* flag, uint32_t value) = 0;
  // How streamWaitFlag waits here, for fairway-info and the logs.
  virtual const char* streamWaitMethod() const = 0;
  // Makes streamWaitFlag use its fallback (a host function) even where the
  // driver could wait itself (FAIRWAY_STREAM_WAIT=host-function), so the
  // two can be measured against each other on one machine.
  virtual void useHostFunctionWaits() {}
  // Native collectives on this runtime's own memory where it brings them:
  // the host-emulated runtime's stand-in for NCCL, so the NCCL branches run
  // in tests. Null for CUDA, whose come from the NCCL plugin.
  virtual const NativeCollectivesEntry* nativeCollectives() { return nullptr; }
};

struct DeviceRuntimePlugin {
  int abiVersion;
  // Fails with the reason when no CUDA runtime or no device is usable.
  Status (*create)(std::unique_ptr<DeviceRuntime>* out);
};

}  // namespace fairway

extern "C" {
typedef const fairway::DeviceRuntimePlugin* (*FairwayDeviceRuntimeEntry)();
}
#define FAIRWAY_DEVICE_RUNTIME_SYMBOL "fairwayDeviceRuntime"
