#include "topo/node_identity.h"

#include <unistd.h>

namespace fairway {

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

std::string nodeIdentity(const std::string& nodeIdOverride) {
  return nodeIdOverride.empty() ? hostName() : nodeIdOverride;
}

}  // namespace fairway
