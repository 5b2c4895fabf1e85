// Blocking TCP sockets whose every wait is bounded by a deadline.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <string>

#include "core/clock.h"
#include "core/status.h"

namespace fairway {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  std::string toString() const;
};

// "host:port" or "[v6]:port", resolved with getaddrinfo.
Status parseHostPort(const std::string& text, SocketAddress* out);
// The first IPv4 address of interface ifname, or of the first interface
// that is up and not loopback when ifname is empty (loopback as a last resort).
Status findInterfaceAddress(const std::string& ifname, SocketAddress* out);

// Whether address is one of this host's interface addresses, or a loopback one.
bool isAddressOfThisHost(const SocketAddress& address);
bool isLoopbackAddress(const SocketAddress& address);
// address with its port replaced.
SocketAddress withPort(const SocketAddress& address, int port);
int portOf(const SocketAddress& address);

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  // Listens on address (port 0 picks one), non-blocking (see tryAccept);
  // *bound gets the real address.
  static Status listenOn(const SocketAddress& address, Socket* out, SocketAddress* bound);
  // Retries refused connections until the deadline (the root may start late).
  static Status connectTo(const SocketAddress& address, Deadline deadline, Socket* out);

  // Accepts a waiting connection without blocking; *out stays invalid when
  // none is waiting.
  Status tryAccept(Socket* out) const;
  // Reads what has arrived, up to bytes, without blocking (*got = 0 when
  // nothing has); fails with fwRemoteError on end of stream.
  Status readSome(void* data, size_t bytes, size_t* got) const;
  Status sendAll(const void* data, size_t bytes, Deadline deadline) const;
  // Fails with fwRemoteError on end of stream.
  Status recvAll(void* data, size_t bytes, Deadline deadline) const;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { int fd = fd_; fd_ = -1; return fd; }
  void close();

 private:
  Status waitFor(short events, Deadline deadline, const char* what) const;
  int fd_ = -1;
};

}  // namespace fairway
