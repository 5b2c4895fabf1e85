// Bootstrap framing: every message is a 16-byte header (magic, type,
// payload length, little-endian) and a payload no larger than the limit the
// reader passes. Bytes that break these rules end the connection.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/socket.h"

namespace fairway {

constexpr uint32_t kFrameMagic = 0x53425746;  // "FWBS"
constexpr size_t kSecretBytes = 16;
// Largest contribution one rank may make to a bootstrap allgather.
constexpr size_t kMaxContributionBytes = 1 << 20;

enum class FrameType : uint32_t {
  Hello = 1,       // secret, rank, nranks
  Contribute = 2,  // this rank's bytes for an allgather
  Gathered = 3,    // every rank's bytes, as [u64 length][bytes] x nranks
  Error = 4,       // text: why the root gave up
  Bye = 5,         // this rank is done with the bootstrap
  Welcome = 6,     // the root admitted this rank
};

struct Frame {
  FrameType type{};
  std::vector<uint8_t> payload;
};

constexpr size_t kFrameHeaderBytes = 16;

// Assembles one frame from a byte stream, however the bytes arrive: the
// caller writes at most wanted() bytes at next() and reports them with
// advance(), so it never reads past the frame's end. The header is checked
// as soon as it is whole: a bad magic, an unknown type or a payload over
// maxPayload fails before any payload is stored.
class FrameReader {
 public:
  explicit FrameReader(size_t maxPayload) : maxPayload_(maxPayload) {}
  uint8_t* next();
  size_t wanted() const;
  Status advance(size_t bytes);
  bool complete() const { return headerFill_ == kFrameHeaderBytes && payloadFill_ == frame_.payload.size(); }
  // The complete frame; the reader starts over.
  Frame take();
  // Copies bytes in until a frame is complete or the bytes run out; *used
  // says how many it took (for parsing from memory).
  Status feed(const uint8_t* data, size_t bytes, size_t* used);

 private:
  size_t maxPayload_;
  uint8_t header_[kFrameHeaderBytes] = {};
  size_t headerFill_ = 0;
  size_t payloadFill_ = 0;
  Frame frame_;
};

Status sendFrame(const Socket& socket, FrameType type, const void* payload, size_t bytes, Deadline deadline);
// Rejects a bad magic, an unknown type, or a payload over maxPayload.
Status recvFrame(const Socket& socket, size_t maxPayload, Deadline deadline, Frame* out);

void appendU32(std::vector<uint8_t>* out, uint32_t value);
void appendU64(std::vector<uint8_t>* out, uint64_t value);
uint32_t readU32(const uint8_t* p);
uint64_t readU64(const uint8_t* p);

struct Hello {
  uint8_t secret[kSecretBytes];
  uint32_t rank;
  uint32_t nranks;
};
constexpr size_t kHelloBytes = kSecretBytes + 8;
std::vector<uint8_t> encodeHello(const Hello& hello);
bool decodeHello(const std::vector<uint8_t>& payload, Hello* out);

// A Gathered payload: nranks times [u64 length][bytes], each at most
// kMaxContributionBytes, nothing after the last.
std::vector<uint8_t> encodeGathered(const std::vector<std::vector<uint8_t>>& contributions);
Status decodeGathered(const std::vector<uint8_t>& payload, int nranks, std::vector<std::vector<uint8_t>>* out);

}  // namespace fairway
