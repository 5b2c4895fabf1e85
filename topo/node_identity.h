// Which node a rank runs on.
#pragma once

#include <string>

namespace fairway {

// The host's name; ranks that share it share a machine.
std::string hostName();
// The node this rank counts as: FAIRWAY_NODE_ID when set (one machine posing
// as several nodes), else the host's name.
std::string nodeIdentity(const std::string& nodeIdOverride);

}  // namespace fairway
