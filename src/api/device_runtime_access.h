// The device runtime this process's communicators use, for Fairway's own
// perf binaries and tests: they allocate, copy, time and order work on
// device memory through it, so the same program runs on a GPU (the CUDA
// plugin) and on a machine without one (FAIRWAY_DEVICE_RUNTIME=host-emulated)
// without linking CUDA. Exported by libfairway.so; not part of the public
// API, whose users bring their own CUDA.
#pragma once

#include "transports/device_runtime.h"

extern "C" {
// The runtime (owned by the library, alive until exit), or null with *why
// saying why none is usable (no plugin, no GPU, FAIRWAY_DEVICE_RUNTIME=none).
__attribute__((visibility("default"))) fairway::DeviceRuntime* fairwayProcessDeviceRuntime(const char** why);
}
