// The intra-node phase of the hierarchical algorithms as NCCL runs it, for
// device buffers: one native communicator over this rank's node (made once
// per communicator), its calls on a private stream and waited for
// (bounded by FAIRWAY_TIMEOUT_MS) before the algorithm hands the result to
// the rail phase. NCCL reads contiguous blocks of one size, so blocks of
// different sizes are packed, each padded to the largest, in device scratch.
#pragma once

#include <memory>

#include "algorithms/node_phase.h"
#include "providers/private_stream.h"
#include "providers/staging_buffer.h"
#include "transports/device_runtime.h"
#include "transports/native_collectives.h"

namespace fairway {

class NativeNodePhase final : public NodePhase {
 public:
  NativeNodePhase(DeviceRuntime& device, int64_t timeoutMs, std::unique_ptr<NativeCollectives> native);
  NativeNodePhase(const NativeNodePhase&) = delete;
  NativeNodePhase& operator=(const NativeNodePhase&) = delete;

  bool readsStrided() const override { return false; }
  Status reduceScatter(CollectiveContext& node, const void* send, void* out, const ChunkLayout& blocks,
                       void* partial) override;
  Status allgather(CollectiveContext& node, void* buf, const ChunkLayout& blocks) override;
  // Failures NCCL saw in enqueued work; tearing down at once after a failure.
  Status asyncError() { return native_->asyncError(); }
  void abort() { native_->abort(); }
  // The node's NCCL communicator, for a shrink (ncclCommShrink).
  NativeCollectives& native() { return *native_; }

 private:
  Status finish(Status enqueued);

  DeviceRuntime& device_;
  PrivateStream stream_;  // before native_: destroyed after it
  std::unique_ptr<NativeCollectives> native_;
  StagingBuffer packed_, result_;  // device: padded blocks, a padded result
};

}  // namespace fairway
