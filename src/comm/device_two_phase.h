// Allreduce, reduce-scatter and allgather on device buffers spanning
// nodes, two-phase: NCCL among the ranks of each node (a node
// sub-communicator) and the network along each rail (a sub-communicator of
// local rank d of every node). The rail phase runs on the host, through
// pinned buffers, so the inter-node transport needs no CUDA support and
// reductions across nodes use the host reducer.
//
// The buffer is cut into slices of about FAIRWAY_STAGING_SLICE_BYTES on the host
// side. The node phase of slice s+1 is enqueued on the caller's stream
// before the host runs slice s's rail phase, so the GPU and NCCL work on
// one slice while the network carries the other. The call returns when
// the stream has run everything it enqueued (as the staged path does).
#pragma once

#include <memory>

#include "algorithms/two_phase.h"
#include "comm/collective_args.h"
#include "comm/staging_buffer.h"

namespace fairway {

class Communicator;

class DeviceTwoPhase {
 public:
  DeviceTwoPhase(Communicator& comm, DeviceRuntime& device);
  ~DeviceTwoPhase();
  DeviceTwoPhase(const DeviceTwoPhase&) = delete;
  DeviceTwoPhase& operator=(const DeviceTwoPhase&) = delete;

  // Whether args runs here: the plan asks for it, every node has the same
  // number of ranks, and NCCL reduces this type with this op. The same on
  // every rank, so all of them take this path or none.
  bool handles(const CollectiveArgs& args) const;
  Status run(const CollectiveArgs& args, void* stream);
  // Breaks the sub-communicators at once (after a failure).
  void abort();

 private:
  // Two of each: slice s uses set s % 2 while the other holds slice s +- 1.
  struct SliceBuffers {
    explicit SliceBuffers(DeviceRuntime& device);
    StagingBuffer hostIn, hostOut;      // pinned: the rail phase's input and output
    StagingBuffer packed, nodeResult;   // device: the node phase's input and output
    void* ready = nullptr;              // event: hostIn holds the slice
  };

  Status ensureGroups();
  Status reduceScatter(const CollectiveArgs& a, void* stream);
  Status allReduce(const CollectiveArgs& a, void* stream);
  Status allGather(const CollectiveArgs& a, void* stream);
  // The few elements an allreduce cannot split evenly among a node's ranks,
  // allreduced through the host over the whole communicator.
  Status allReduceTail(const CollectiveArgs& a, size_t from, void* stream);
  Status nodeCollective(CollectiveKind kind, const void* send, void* recv, size_t count, const CollectiveArgs& a,
                        void* stream);
  Status railCollective(CollectiveKind kind, const void* send, void* recv, size_t count, const CollectiveArgs& a);
  template <typename Prepare, typename Finish>
  Status pipelineSlices(int slices, Prepare prepare, Finish finish);
  Status markReady(SliceBuffers& b, void* stream);
  Status waitReady(SliceBuffers& b);

  Communicator& comm_;
  DeviceRuntime& device_;
  int64_t timeoutMs_;
  TwoPhaseGroups groups_;
  std::unique_ptr<Communicator> node_;  // this node's ranks, by local rank
  std::unique_ptr<Communicator> rail_;  // this rail's ranks, by node
  std::unique_ptr<SliceBuffers> slices_[2];
  bool aborted_ = false;  // after abort() the sub-communicators are closed without a barrier
};

}  // namespace fairway
