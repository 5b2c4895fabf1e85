#include "bootstrap/wire.h"

#include <cstring>

namespace fairway {

void appendU32(std::vector<uint8_t>* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<uint8_t>(value >> (8 * i)));
}
void appendU64(std::vector<uint8_t>* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<uint8_t>(value >> (8 * i)));
}
uint32_t readU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t readU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

Status sendFrame(const Socket& socket, FrameType type, const void* payload, size_t bytes, Deadline deadline) {
  std::vector<uint8_t> header;
  appendU32(&header, kFrameMagic);
  appendU32(&header, static_cast<uint32_t>(type));
  appendU64(&header, bytes);
  FW_RETURN_IF_ERROR(socket.sendAll(header.data(), header.size(), deadline));
  return bytes == 0 ? Status::ok() : socket.sendAll(payload, bytes, deadline);
}

Status recvFrame(const Socket& socket, size_t maxPayload, Deadline deadline, Frame* out) {
  uint8_t header[16];
  FW_RETURN_IF_ERROR(socket.recvAll(header, sizeof(header), deadline));
  if (readU32(header) != kFrameMagic) return Status(fwAuthError, "malformed bootstrap frame (bad magic)");
  uint32_t type = readU32(header + 4);
  if (type < static_cast<uint32_t>(FrameType::Hello) || type > static_cast<uint32_t>(FrameType::Welcome)) {
    return Status(fwAuthError, "malformed bootstrap frame (unknown type " + std::to_string(type) + ")");
  }
  uint64_t length = readU64(header + 8);
  if (length > maxPayload) {
    return Status(fwAuthError, "oversized bootstrap frame (" + std::to_string(length) + " bytes, limit " +
                                   std::to_string(maxPayload) + ")");
  }
  out->type = static_cast<FrameType>(type);
  out->payload.resize(length);
  return length == 0 ? Status::ok() : socket.recvAll(out->payload.data(), length, deadline);
}

std::vector<uint8_t> encodeHello(const Hello& hello) {
  std::vector<uint8_t> out(hello.secret, hello.secret + kSecretBytes);
  appendU32(&out, hello.rank);
  appendU32(&out, hello.nranks);
  return out;
}

bool decodeHello(const std::vector<uint8_t>& payload, Hello* out) {
  if (payload.size() != kHelloBytes) return false;
  std::memcpy(out->secret, payload.data(), kSecretBytes);
  out->rank = readU32(payload.data() + kSecretBytes);
  out->nranks = readU32(payload.data() + kSecretBytes + 4);
  return true;
}

}  // namespace fairway
