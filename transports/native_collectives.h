// Collectives a transport runs itself on device memory, ordered on the
// caller's stream (NCCL). The core hands them validated arguments; the
// transport enqueues the work and returns, as NCCL does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "fairway/fairway.h"

namespace fairway {

struct NativeInitArgs {
  int rank = 0;
  int size = 1;
  int device = 0;                  // CUDA device ordinal this rank drives
  std::vector<uint8_t> uniqueId;   // from NativeCollectivesEntry::makeUniqueId on rank 0
};

class NativeCollectives {
 public:
  virtual ~NativeCollectives() = default;

  virtual Status allReduce(const void* send, void* recv, size_t count, fwDataType_t datatype, fwRedOp_t op,
                           void* stream) = 0;
  virtual Status reduceScatter(const void* send, void* recv, size_t recvCount, fwDataType_t datatype, fwRedOp_t op,
                               void* stream) = 0;
  virtual Status allGather(const void* send, void* recv, size_t sendCount, fwDataType_t datatype, void* stream) = 0;
  virtual Status broadcast(const void* send, void* recv, size_t count, fwDataType_t datatype, int root,
                           void* stream) = 0;
  virtual Status reduce(const void* send, void* recv, size_t count, fwDataType_t datatype, fwRedOp_t op, int root,
                        void* stream) = 0;
  virtual Status send(const void* buf, size_t count, fwDataType_t datatype, int peer, void* stream) = 0;
  virtual Status recv(void* buf, size_t count, fwDataType_t datatype, int peer, void* stream) = 0;

  // The error NCCL reports for work already enqueued (a peer that died,
  // a network failure), or ok.
  virtual Status asyncError() = 0;
  // Tears down at once, abandoning enqueued work (after a failure).
  virtual void abort() = 0;

  // Whether shrink can make this communicator's successor here (NCCL's
  // ncclCommShrink, NCCL 2.27 on, in the NCCL the process runs); where it
  // cannot, the caller makes a communicator afresh.
  virtual bool canShrink() const { return false; }
  // Collective over the ranks not in `exclude` (ascending ranks of this
  // communicator): their communicator, renumbered in order, made from this
  // one. abortInFlight ends this one's in-flight work first, as after a
  // failure (NCCL_SHRINK_ABORT).
  virtual Status shrink(const std::vector<int>& exclude, bool abortInFlight,
                        std::unique_ptr<NativeCollectives>* out) {
    (void)exclude;
    (void)abortInFlight;
    out->reset();
    return Status(fwInternalError, "this native transport cannot shrink a communicator");
  }
};

struct NativeCollectivesEntry {
  // Why the transport cannot run here (library missing, no device), or ok.
  Status (*available)();
  // Whether a reduction of this type with this op runs natively; the core
  // stages it over UCX if not.
  bool (*supports)(fwDataType_t datatype, fwRedOp_t op);
  Status (*makeUniqueId)(std::vector<uint8_t>* out);
  Status (*create)(const NativeInitArgs& args, std::unique_ptr<NativeCollectives>* out);
};

}  // namespace fairway
