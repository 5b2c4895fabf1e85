// Where a perf binary's buffers live (-m host|cuda). Host memory is used
// directly; device memory gets host mirrors: inputs are filled and results
// checked on the host, with copies around the timed loops. The CUDA side is
// compiled where the toolkit was found at build time.
#pragma once

#include <cstddef>
#include <string>

namespace fairway::perf {

enum class Memory { Host, Cuda };

// Picks this rank's GPU (local rank mod devices, from the launcher's
// variables) before the communicator exists, so Fairway sees it at
// creation. Fails, saying why, without a usable device or CUDA support.
bool selectDevice(std::string* why);

void* allocate(Memory memory, size_t bytes);  // zero-filled; NULL on failure
void release(Memory memory, void* buffer);
// Copies between a host mirror and a buffer of `memory` (memcpy for host).
bool copyToBuffer(Memory memory, void* dst, const void* src, size_t bytes);
bool copyFromBuffer(Memory memory, void* dst, const void* src, size_t bytes);
// Waits for work enqueued on device buffers (nothing for host).
bool synchronize(Memory memory);

}  // namespace fairway::perf
