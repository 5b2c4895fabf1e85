// libFuzzer target: the bytes a bootstrap root or client reads from the
// network. The first input byte picks the reader's payload limit and how
// the rest is cut into reads; every complete frame is decoded as the root
// (Hello) and the client (Gathered) would decode it.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "bootstrap/wire.h"

using namespace fairway;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  const size_t maxPayload = (control & 1) ? kHelloBytes : 4096;
  const size_t cut = 1 + (control >> 1);  // 1..128 bytes per read
  const int nranks = 1 + (control & 7);
  FrameReader reader(maxPayload);
  size_t pos = 1;
  while (pos < size) {
    size_t used = 0;
    size_t chunk = cut < size - pos ? cut : size - pos;
    if (!reader.feed(data + pos, chunk, &used).isOk()) return 0;  // the connection would be dropped
    if (used == 0 || used > chunk) __builtin_trap();
    pos += used;
    if (!reader.complete()) continue;
    Frame frame = reader.take();
    if (frame.payload.size() > maxPayload) __builtin_trap();
    if (frame.type == FrameType::Hello) {
      Hello hello{};
      if (decodeHello(frame.payload, &hello) && encodeHello(hello) != frame.payload) __builtin_trap();
    } else if (frame.type == FrameType::Gathered) {
      std::vector<std::vector<uint8_t>> all;
      if (decodeGathered(frame.payload, nranks, &all).isOk()) {
        if (all.size() != static_cast<size_t>(nranks) || encodeGathered(all) != frame.payload) __builtin_trap();
      }
    }
  }
  return 0;
}
