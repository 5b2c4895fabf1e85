// What tests reach of the host-emulated device runtime
// (libfairway-device-emulated.so, FAIRWAY_DEVICE_RUNTIME=host-emulated):
// its streams, to enqueue their own work and to hold a stream back, and
// its device memory. Found with dlsym(handle, "fairwayEmulatedDevice") on
// the same library the core loaded.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fairway {

struct EmulatedDeviceHooks {
  void* (*createStream)();
  void (*destroyStream)(void* stream);  // after its queued work has run
  // Runs work(argument) on the stream's thread, after what was enqueued
  // before it; a null stream is the default stream.
  void (*enqueue)(void* stream, void (*work)(void* argument), void* argument);
  // 0 once everything enqueued on the stream has run, -1 after timeoutMs.
  int (*synchronize)(void* stream, int64_t timeoutMs);
  void* (*allocate)(size_t bytes);  // device memory, as fwMemAlloc gives it
  void (*free)(void* pointer);
};

}  // namespace fairway

extern "C" {
typedef const fairway::EmulatedDeviceHooks* (*FairwayEmulatedDeviceEntry)();
}
#define FAIRWAY_EMULATED_DEVICE_SYMBOL "fairwayEmulatedDevice"
