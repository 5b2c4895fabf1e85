// The transport interface: the only view of the network that algorithms get.
//
// A transport connects the ranks of one communicator and moves tagged
// messages between them asynchronously. Tags are matched exactly under a
// mask, in posting order between one sender and one receiver (MPI's
// non-overtaking rule), which is what lets algorithms stream segments.
//
// Transports are plugins: a shared object exporting
//   extern "C" const fairway::TransportPlugin* fairwayTransportPlugin();
// that the core loads by name at run time. Plugins are built with the core,
// so the C++ types below are the ABI; kTransportAbiVersion guards mismatches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace fairway {

constexpr int kTransportAbiVersion = 4;

// Where a buffer's bytes are. A message says it to its transport, which
// then moves them without inspecting the pointer: UCX, left to find out,
// takes a cudaMalloc buffer whose allocation it did not see for host
// memory and copies from it on the CPU.
enum class MemoryType { Host, Cuda };

struct TransportCapabilities {
  bool hostMemory = false;
  bool cudaMemory = false;
  bool nativeCollectives = false;
  double bandwidthGBps = 0;  // rough per-link figures for the planner
  double latencyUs = 0;
};

// Opaque handle to an operation in flight; kCompleted means it finished
// when posted (small eager sends usually do).
using RequestHandle = void*;
inline RequestHandle const kCompleted = nullptr;

struct TransportInitArgs {
  int rank = 0;
  int size = 1;
  int64_t timeoutMs = 0;
  // Reach peers over network devices only, never shared memory: the
  // inter-node level, which must cross the wire even when "nodes" are
  // emulated on one host.
  bool networkOnly = false;
  // The network device to use ("mlx5_0:1", "eth0"); empty lets the
  // transport choose.
  std::string netDevice;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual const char* name() const = 0;
  virtual const TransportCapabilities& capabilities() const = 0;

  // This rank's address, to be exchanged out of band before connect().
  virtual std::vector<uint8_t> localAddress() const = 0;
  // Connects to every rank given all addresses (indexed by rank); ranks
  // with an empty address are served by another transport. Peers on
  // this host may be reached over transports that cannot report a peer's
  // death (shared memory): the communicator watches their processes itself.
  virtual Status connect(const std::vector<std::vector<uint8_t>>& addresses, const std::vector<bool>& sameHost) = 0;

  virtual Status isend(int peer, const void* buf, size_t bytes, uint64_t tag, MemoryType memory,
                       RequestHandle* request) = 0;
  virtual Status irecv(int peer, void* buf, size_t bytes, uint64_t tag, uint64_t tagMask, MemoryType memory,
                       RequestHandle* request) = 0;
  // Sets *done; once done, the handle is released and the status is the
  // operation's (a recv's truncation or a failed peer shows here).
  virtual Status test(RequestHandle request, bool* done) = 0;
  // Abandons an operation (teardown after an error); the handle is released.
  virtual void cancel(RequestHandle request) = 0;

  // Drives communication; returns true if anything happened.
  virtual bool progress() = 0;
  // Prepares the event fd to signal new work; *armed is false when work is
  // already pending (progress again instead of blocking). Callers then
  // poll eventFd() without holding the transport, so other threads can post.
  virtual Status armEvents(bool* armed) = 0;
  // A file descriptor that becomes readable when armed work arrives, or -1.
  virtual int eventFd() const = 0;

  // Whether an unmatched message whose tag matches (tag, mask) has arrived;
  // *foundTag gets its full tag. Used to diagnose mismatched collectives.
  virtual bool probe(uint64_t tag, uint64_t tagMask, uint64_t* foundTag) = 0;

  // Ranks whose connection the transport saw fail, if any.
  virtual int firstFailedPeer() const = 0;

  // Flushes and closes connections; bounded by the timeout given at creation.
  // With force, drops them at once (after an error, or on abort).
  virtual void disconnect(bool force) = 0;
};

struct NativeCollectivesEntry;

struct TransportPlugin {
  int abiVersion;
  const char* name;
  // Point-to-point transport, or NULL. Fails with a reason (fwNotAvailable)
  // when the transport cannot run here.
  Status (*create)(const TransportInitArgs& args, std::unique_ptr<Transport>* out);
  // Native collectives on device memory (native_collectives.h), or NULL.
  const struct NativeCollectivesEntry* native;
};

}  // namespace fairway

extern "C" {
typedef const fairway::TransportPlugin* (*FairwayTransportPluginEntry)();
}
#define FAIRWAY_TRANSPORT_PLUGIN_SYMBOL "fairwayTransportPlugin"
