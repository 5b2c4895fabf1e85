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

}  // namespace fairway
