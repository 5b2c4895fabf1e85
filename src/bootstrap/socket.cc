#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

namespace fairway {
namespace {

Status systemError(const std::string& what) {
  return Status(fwSystemError, what + ": " + std::strerror(errno));
}

}  // namespace

std::string SocketAddress::toString() const {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (storage.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (storage.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "(no address)";
}

Status parseHostPort(const std::string& text, SocketAddress* out) {
  std::string host;
  std::string port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find("]:");
    if (close == std::string::npos) return Status(fwInvalidArgument, "'" + text + "' is not [host]:port");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0) return Status(fwInvalidArgument, "'" + text + "' is not host:port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  long portNumber = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || portNumber < 1 || portNumber > 65535) {
    return Status(fwInvalidArgument, "'" + text + "' has no valid port");
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0 || found == nullptr) {
    return Status(fwInvalidArgument, "cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  std::memcpy(&out->storage, found->ai_addr, found->ai_addrlen);
  out->length = found->ai_addrlen;
  freeaddrinfo(found);
  return Status::ok();
}

Status findInterfaceAddress(const std::string& ifname, SocketAddress* out) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return systemError("getifaddrs");
  const ifaddrs* chosen = nullptr;
  const ifaddrs* loopback = nullptr;
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET) continue;
    if (!(ifa->ifa_flags & IFF_UP)) continue;
    if (!ifname.empty()) {
      if (ifname == ifa->ifa_name) { chosen = ifa; break; }
      continue;
    }
    if (ifa->ifa_flags & IFF_LOOPBACK) {
      if (loopback == nullptr) loopback = ifa;
    } else if (chosen == nullptr) {
      chosen = ifa;
    }
  }
  if (chosen == nullptr) chosen = ifname.empty() ? loopback : nullptr;
  if (chosen == nullptr) {
    freeifaddrs(list);
    return Status(fwInvalidArgument, ifname.empty() ? "no network interface is up"
                                                    : "FAIRWAY_SOCKET_IFNAME=" + ifname + " has no IPv4 address that is up");
  }
  std::memcpy(&out->storage, chosen->ifa_addr, sizeof(sockaddr_in));
  out->length = sizeof(sockaddr_in);
  freeifaddrs(list);
  return Status::ok();
}

bool isLoopbackAddress(const SocketAddress& address) {
  if (address.storage.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&address.storage);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (address.storage.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address.storage);
    return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
  }
  return false;
}

bool isAddressOfThisHost(const SocketAddress& address) {
  if (isLoopbackAddress(address)) return true;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (const ifaddrs* ifa = list; ifa != nullptr && !found; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != address.storage.ss_family) continue;
    if (address.storage.ss_family == AF_INET) {
      found = reinterpret_cast<const sockaddr_in*>(ifa->ifa_addr)->sin_addr.s_addr ==
              reinterpret_cast<const sockaddr_in*>(&address.storage)->sin_addr.s_addr;
    } else if (address.storage.ss_family == AF_INET6) {
      found = std::memcmp(&reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr)->sin6_addr,
                          &reinterpret_cast<const sockaddr_in6*>(&address.storage)->sin6_addr, sizeof(in6_addr)) == 0;
    }
  }
  freeifaddrs(list);
  return found;
}

int portOf(const SocketAddress& address) {
  if (address.storage.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&address.storage)->sin_port);
  if (address.storage.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&address.storage)->sin6_port);
  }
  return 0;
}

SocketAddress withPort(const SocketAddress& address, int port) {
  SocketAddress out = address;
  if (out.storage.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&out.storage)->sin_port = htons(static_cast<uint16_t>(port));
  } else if (out.storage.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&out.storage)->sin6_port = htons(static_cast<uint16_t>(port));
  }
  return out;
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) { close(); fd_ = other.release(); }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status Socket::listenOn(const SocketAddress& address, Socket* out, SocketAddress* bound) {
  Socket s(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) return systemError("socket");
  int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(s.fd(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0) {
    return systemError("bind " + address.toString());
  }
  if (::listen(s.fd(), 1024) != 0) return systemError("listen");
  bound->length = sizeof(bound->storage);
  if (getsockname(s.fd(), reinterpret_cast<sockaddr*>(&bound->storage), &bound->length) != 0) {
    return systemError("getsockname");
  }
  *out = std::move(s);
  return Status::ok();
}

Status Socket::connectTo(const SocketAddress& address, Deadline deadline, Socket* out) {
  auto backoff = std::chrono::milliseconds(10);
  for (;;) {
    Socket s(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) return systemError("socket");
    if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) == 0) {
      int one = 1;
      setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      *out = std::move(s);
      return Status::ok();
    }
    bool retryable = errno == ECONNREFUSED || errno == ETIMEDOUT || errno == ENETUNREACH || errno == EHOSTUNREACH;
    if (!retryable) return systemError("connect to " + address.toString());
    if (Clock::now() + backoff >= deadline) {
      return Status(fwTimeout, "no bootstrap root answered at " + address.toString() +
                                   " before the timeout (is rank 0 running, and is this the address its root listens "
                                   "on? a host name may resolve differently on rank 0's host)");
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
}

Status Socket::waitFor(short events, Deadline deadline, const char* what) const {
  for (;;) {
    pollfd pfd{fd_, events, 0};
    int rc = ::poll(&pfd, 1, msUntil(deadline));
    if (rc > 0) return Status::ok();
    if (rc == 0) return Status(fwTimeout, std::string("timed out waiting to ") + what);
    if (errno != EINTR) return systemError("poll");
  }
}

Status Socket::tryAccept(Socket* out) const {
  for (;;) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      *out = Socket(fd);
      return Status::ok();
    }
    if (errno == EINTR) continue;
    // A connection reset before it was accepted is the peer's business.
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) return Status::ok();
    return systemError("accept");
  }
}

Status Socket::readSome(void* data, size_t bytes, size_t* got) const {
  *got = 0;
  for (;;) {
    ssize_t n = ::recv(fd_, data, bytes, MSG_DONTWAIT);
    if (n > 0) { *got = static_cast<size_t>(n); return Status::ok(); }
    if (n == 0) return Status(fwRemoteError, "bootstrap peer closed the connection");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok();
    return Status(fwRemoteError, std::string("bootstrap receive failed: ") + std::strerror(errno));
  }
}

Status Socket::sendAll(const void* data, size_t bytes, Deadline deadline) const {
  auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    FW_RETURN_IF_ERROR(waitFor(POLLOUT, deadline, "send bootstrap data"));
    ssize_t n = ::send(fd_, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Status(fwRemoteError, std::string("bootstrap peer closed the connection: ") + std::strerror(errno));
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return Status::ok();
}

Status Socket::recvAll(void* data, size_t bytes, Deadline deadline) const {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    FW_RETURN_IF_ERROR(waitFor(POLLIN, deadline, "receive bootstrap data"));
    ssize_t n = ::recv(fd_, p, bytes, MSG_DONTWAIT);
    if (n == 0) return Status(fwRemoteError, "bootstrap peer closed the connection");
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Status(fwRemoteError, std::string("bootstrap receive failed: ") + std::strerror(errno));
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return Status::ok();
}

}  // namespace fairway
