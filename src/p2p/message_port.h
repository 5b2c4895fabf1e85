// What an algorithm sends and receives through: tagged messages to the
// ranks of a communicator and bounded waits for them. The Messenger is the
// real one, over the communicator's transports; fairway-sim gives each
// simulated rank one that completes messages in virtual time (sim/), so
// the same algorithm code runs in a job and in the simulator.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "transports/transport.h"

namespace fairway {

class Transport;

// One posted send or receive, owned by the caller until it is waited for.
// 32 bytes: a two-phase call on thousands of nodes holds thousands per rank.
struct Pending {
  RequestHandle handle = kCompleted;
  uint64_t tag = 0;
  Transport* via = nullptr;  // the transport that owns handle (null in the simulator)
  int peer = -1;
  bool isRecv = false;
  bool done = true;
};

class MessagePort {
 public:
  virtual ~MessagePort() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // memory: where buf's bytes are (device buffers must say so: the
  // transport is told, not left to guess).
  virtual Status send(int peer, const void* buf, size_t bytes, uint64_t tag, Pending* out,
                      MemoryType memory = MemoryType::Host) = 0;
  virtual Status recv(int peer, void* buf, size_t bytes, uint64_t tag, Pending* out,
                      MemoryType memory = MemoryType::Host) = 0;
  // Waits for every operation in list; bounded. On failure the rest are cancelled.
  virtual Status waitAll(Pending* list, size_t count) = 0;
};

}  // namespace fairway
