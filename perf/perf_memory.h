// Where a perf binary's buffers live (-m host|mappable|cuda). Host memory
// (malloc's, or fwHostMemAlloc's that the node's peers map) is used
// directly; device memory gets host mirrors: inputs are filled and results
// checked on the host, with copies around the timed loops. Device memory,
// its copies and the waits for it go through the device runtime the
// communicators use (the CUDA plugin, or FAIRWAY_DEVICE_RUNTIME=host-emulated
// on a machine without a GPU), so perf binaries never link CUDA.
#pragma once

#include <cstddef>
#include <string>

namespace fairway::perf {

enum class Memory { Host, Mappable, Cuda };
inline bool onDevice(Memory memory) { return memory == Memory::Cuda; }

// Picks this rank's GPU (local rank mod devices, from the launcher's
// variables) before the communicator exists, so Fairway sees it at
// creation. Fails, saying why, without a usable device runtime.
bool selectDevice(std::string* why);

void* allocate(Memory memory, size_t bytes);  // zero-filled; NULL on failure
void release(Memory memory, void* buffer);
// Copies between a host mirror and a buffer of `memory` (memcpy for host).
bool copyToBuffer(Memory memory, void* dst, const void* src, size_t bytes);
bool copyFromBuffer(Memory memory, void* dst, const void* src, size_t bytes);
// Waits for work enqueued on device buffers on the default stream, where
// the perf binaries' calls go (nothing for host).
bool synchronize(Memory memory);

}  // namespace fairway::perf
