#include "bootstrap/wire.h"

#include <algorithm>
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

uint8_t* FrameReader::next() {
  return headerFill_ < kFrameHeaderBytes ? header_ + headerFill_ : frame_.payload.data() + payloadFill_;
}

size_t FrameReader::wanted() const {
  return headerFill_ < kFrameHeaderBytes ? kFrameHeaderBytes - headerFill_ : frame_.payload.size() - payloadFill_;
}

Status FrameReader::advance(size_t bytes) {
  if (headerFill_ < kFrameHeaderBytes) {
    headerFill_ += bytes;
    if (headerFill_ < kFrameHeaderBytes) return Status::ok();
    if (readU32(header_) != kFrameMagic) return Status(fwAuthError, "malformed bootstrap frame (bad magic)");
    uint32_t type = readU32(header_ + 4);
    if (type < static_cast<uint32_t>(FrameType::Hello) || type > static_cast<uint32_t>(FrameType::Welcome)) {
      return Status(fwAuthError, "malformed bootstrap frame (unknown type " + std::to_string(type) + ")");
    }
    uint64_t length = readU64(header_ + 8);
    if (length > maxPayload_) {
      return Status(fwAuthError, "oversized bootstrap frame (" + std::to_string(length) + " bytes, limit " +
                                     std::to_string(maxPayload_) + ")");
    }
    frame_.type = static_cast<FrameType>(type);
    frame_.payload.resize(length);
    return Status::ok();
  }
  payloadFill_ += bytes;
  return Status::ok();
}

Frame FrameReader::take() {
  Frame out = std::move(frame_);
  frame_ = Frame{};
  headerFill_ = 0;
  payloadFill_ = 0;
  return out;
}

Status FrameReader::feed(const uint8_t* data, size_t bytes, size_t* used) {
  *used = 0;
  while (!complete() && *used < bytes) {
    size_t n = std::min(wanted(), bytes - *used);
    std::memcpy(next(), data + *used, n);
    *used += n;
    FW_RETURN_IF_ERROR(advance(n));
  }
  return Status::ok();
}

Status recvFrame(const Socket& socket, size_t maxPayload, Deadline deadline, Frame* out) {
  FrameReader reader(maxPayload);
  while (!reader.complete()) {
    size_t n = reader.wanted();
    FW_RETURN_IF_ERROR(socket.recvAll(reader.next(), n, deadline));
    FW_RETURN_IF_ERROR(reader.advance(n));
  }
  *out = reader.take();
  return Status::ok();
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

std::vector<uint8_t> encodeGathered(const std::vector<std::vector<uint8_t>>& contributions) {
  std::vector<uint8_t> payload;
  for (const auto& c : contributions) {
    appendU64(&payload, c.size());
    payload.insert(payload.end(), c.begin(), c.end());
  }
  return payload;
}

Status decodeGathered(const std::vector<uint8_t>& p, int nranks, std::vector<std::vector<uint8_t>>* out) {
  out->assign(nranks, {});
  size_t pos = 0;
  for (int r = 0; r < nranks; ++r) {
    if (p.size() - pos < 8) return Status(fwAuthError, "bootstrap root sent a truncated allgather");
    uint64_t length = readU64(p.data() + pos);
    pos += 8;
    if (length > kMaxContributionBytes || length > p.size() - pos) {
      return Status(fwAuthError, "bootstrap root sent a malformed allgather");
    }
    (*out)[r].assign(p.begin() + pos, p.begin() + pos + length);
    pos += length;
  }
  if (pos != p.size()) return Status(fwAuthError, "bootstrap root sent trailing bytes");
  return Status::ok();
}

}  // namespace fairway
