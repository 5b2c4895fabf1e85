// What a process still holds after its communicators are gone: the TCP
// ports it listens on (a bootstrap root, a transport's listener), so tests
// can check that recovery leaves none behind.
#pragma once

#include <vector>

namespace fairway::testing {

// The local ports of the listening TCP sockets (IPv4 and IPv6) among this
// process's open descriptors, ascending.
std::vector<int> listeningTcpPortsOfThisProcess();

}  // namespace fairway::testing
