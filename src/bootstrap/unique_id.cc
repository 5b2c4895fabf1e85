#include "bootstrap/unique_id.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

namespace fairway {
namespace {
constexpr uint32_t kIdMagic = 0x44495746;  // "FWID"
constexpr uint32_t kIdVersion = 1;
constexpr size_t kAddressOffset = 8;
static_assert(kAddressOffset + sizeof(sockaddr_in6) <= FAIRWAY_UNIQUE_ID_BYTES - kSecretBytes,
              "the root address and the secret must both fit in fwUniqueId");
}  // namespace

void encodeUniqueId(const BootstrapId& id, fwUniqueId* out) {
  std::memset(out, 0, sizeof(*out));
  std::vector<uint8_t> head;
  appendU32(&head, kIdMagic);
  appendU32(&head, kIdVersion);
  std::memcpy(out->internal, head.data(), head.size());
  // Only the address's own bytes fit: IPv4 and IPv6 socket addresses are <= 28.
  size_t addressBytes = id.root.length;
  std::memcpy(out->internal + kAddressOffset, &id.root.storage, addressBytes);
  std::memcpy(out->internal + FAIRWAY_UNIQUE_ID_BYTES - kSecretBytes, id.secret, kSecretBytes);
}

Status decodeUniqueId(const fwUniqueId& in, BootstrapId* out) {
  auto* bytes = reinterpret_cast<const uint8_t*>(in.internal);
  if (readU32(bytes) != kIdMagic || readU32(bytes + 4) != kIdVersion) {
    return Status(fwInvalidArgument, "commId is not a unique id from fwGetUniqueId (bad magic or version)");
  }
  sockaddr_storage storage{};
  std::memcpy(&storage, bytes + kAddressOffset, sizeof(sockaddr_in6));
  if (storage.ss_family == AF_INET) {
    out->root.length = sizeof(sockaddr_in);
  } else if (storage.ss_family == AF_INET6) {
    out->root.length = sizeof(sockaddr_in6);
  } else {
    return Status(fwInvalidArgument, "commId holds no IPv4 or IPv6 root address");
  }
  out->root.storage = storage;
  std::memcpy(out->secret, bytes + FAIRWAY_UNIQUE_ID_BYTES - kSecretBytes, kSecretBytes);
  return Status::ok();
}

Status randomSecret(uint8_t secret[kSecretBytes]) {
  size_t filled = 0;
  while (filled < kSecretBytes) {
    ssize_t n = getrandom(secret + filled, kSecretBytes - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status(fwSystemError, std::string("getrandom: ") + std::strerror(errno));
    }
    filled += static_cast<size_t>(n);
  }
  return Status::ok();
}

void secretFromText(const std::string& text, uint8_t secret[kSecretBytes]) {
  // Two FNV-1a passes with different offsets fill 128 bits; this is an
  // identity check between cooperating processes, not cryptography.
  uint64_t h[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
  for (int k = 0; k < 2; ++k) {
    for (unsigned char c : text) { h[k] ^= c; h[k] *= 0x100000001b3ull; }
  }
  std::memcpy(secret, h, kSecretBytes);
}

}  // namespace fairway
