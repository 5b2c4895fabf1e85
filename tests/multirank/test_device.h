// Device memory and streams for the device-path tests, through the device
// runtime the communicators use (libfairway's fairwayProcessDeviceRuntime):
// the host-emulated runtime in CI (FAIRWAY_DEVICE_RUNTIME=host-emulated),
// the CUDA plugin on a GPU. A test never reads or writes device memory
// itself: it fills and checks host mirrors and copies through these, so
// the same test runs on both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "transports/device_runtime.h"

namespace fairway::testing {

// This process's device runtime; null (the reason in whyNoTestDevice) when
// none is usable.
DeviceRuntime* testDevice();
std::string whyNoTestDevice();

// What a rank's process would find, probed in a child process so that the
// test process itself never initialises CUDA before it forks its ranks.
struct DeviceProbe {
  bool usable = false;
  bool memoryIsCuda = false;  // false under the host-emulated runtime
  int devices = 0;
  std::string why;            // when not usable
};
const DeviceProbe& probeDevice();

// Streams for the test's own calls; every wait is bounded (60 s).
void* createTestStream();
void destroyTestStream(void* stream);
// 0 once everything on the stream has run, -1 (said on stderr) otherwise.
int synchronizeTestStream(void* stream);

// Blocking copies between host and device memory, on a stream of their
// own (never one a test holds back), waited for.
bool copyToDevice(void* device, const void* host, size_t bytes);
bool copyFromDevice(void* host, const void* device, size_t bytes);

// A point on a stream that work enqueued behind it cannot pass until the
// test opens it: a flag the stream waits for (cuStreamWaitValue32 on a GPU).
class StreamGate {
 public:
  explicit StreamGate(void* stream);
  // Whether the stream waits on the gate (false: the flag could not be made
  // or waited on, and the stream runs on unheld).
  bool holds() const { return flag_ != nullptr; }
  void open();

 private:
  uint32_t* flag_ = nullptr;
};

}  // namespace fairway::testing
