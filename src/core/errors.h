// The calling thread's last error, as the C API reports it.
#pragma once

#include "core/status.h"

namespace fairway {

// Records status as the thread's last error (when it failed) and returns its
// code: the one line every C entry point ends with.
fwResult_t reportToCaller(const Status& status);

}  // namespace fairway
