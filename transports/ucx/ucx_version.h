// The UCX loaded at run time must be the UCX the plugin was built against:
// the dynamic loader takes the first libucp.so.0 on its path, so another
// installation (a wheel's, a system's) would otherwise be used silently.
#pragma once

#include <string>

#include "core/status.h"

namespace fairway {

struct UcxVersion {
  unsigned major = 0, minor = 0, release = 0;
  std::string where;  // the library loaded, or the directory built against
};

// ok when major and minor agree; else an error naming both versions and
// both places, and what to change.
inline Status checkUcxVersion(const UcxVersion& builtAgainst, const UcxVersion& loaded) {
  if (builtAgainst.major == loaded.major && builtAgainst.minor == loaded.minor) return Status::ok();
  const std::string built = std::to_string(builtAgainst.major) + "." + std::to_string(builtAgainst.minor);
  const std::string found = std::to_string(loaded.major) + "." + std::to_string(loaded.minor) + "." +
                            std::to_string(loaded.release);
  return Status(fwSystemError, "ucx: the libucp loaded at run time is UCX " + found + " (" + loaded.where +
                                   "), but Fairway's UCX plugin was built against UCX " + built + " (" +
                                   builtAgainst.where + "): put UCX " + built +
                                   "'s library directory first in LD_LIBRARY_PATH, or rebuild Fairway against UCX " +
                                   found + " (FAIRWAY_UCX_CMAKE_DIR, or its pkg-config file)");
}

}  // namespace fairway
