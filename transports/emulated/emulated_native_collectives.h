// The host-emulated runtime's stand-in for NCCL (see the .cc).
#pragma once

#include <functional>

#include "transports/native_collectives.h"

namespace fairway {

// Enqueues work on an emulated stream (null: the default stream).
using EmulatedStreamQueue = std::function<void(void* stream, std::function<void()> work)>;

const NativeCollectivesEntry* emulatedNativeCollectives(EmulatedStreamQueue queue);

}  // namespace fairway
