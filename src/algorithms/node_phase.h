// How the phases of a hierarchical algorithm are served. The algorithm is
// written once (two_phase_*.cc, leader_collectives.cc); a Hierarchy says
// which provider runs its intra-node phase and in which memory its rail
// phase works:
//  - node phase: the point-to-point algorithms over the node's ranks
//    (messages over UCX, in the collective's data space), a native
//    collective of the node (NCCL over the node's GPUs, on device memory),
//    or the node's shared-memory segment (host memory);
//  - rail phase: in the data space itself (host buffers, or device memory
//    UCX reaches), or in pinned host memory the algorithm stages its
//    slices through (device memory UCX cannot reach).
#pragma once

#include "algorithms/block_addresses.h"
#include "algorithms/chunk_layout.h"
#include "core/status.h"

namespace fairway {

class CollectiveContext;
class DataSpace;

class NodePhase {
 public:
  virtual ~NodePhase() = default;
  // Whether it reads blocks laid out at a stride in place; if not, the
  // algorithm packs them first.
  virtual bool readsStrided() const = 0;
  // Block r of `blocks` in send, combined over the node's ranks with the
  // node context's reducer (never finalised), lands in out on local rank r.
  // partial: scratch laid out like send (the ring's partial sums).
  virtual Status reduceScatter(CollectiveContext& node, const void* send, void* out, const ChunkLayout& blocks,
                               void* partial) = 0;
  // buf holds this rank's block of `blocks`; fills in the others.
  virtual Status allgather(CollectiveContext& node, void* buf, const ChunkLayout& blocks) = 0;
  // The same with this rank's block at `own` (it may already sit in buf):
  // by default copied into buf first; a provider may do both at once.
  virtual Status allgatherFrom(CollectiveContext& node, const void* own, void* buf, const ChunkLayout& blocks);
  // The list forms of a single-node communicator (blocks at addresses of
  // their own), where the provider copies block by block: true if it
  // does, and then allgatherInto and reduceScatterFrom serve them; false
  // (the default), and the caller packs the blocks into one buffer.
  virtual bool takesBlockLists() const { return false; }
  // As allgatherFrom and reduceScatter, over blocks that may lie anywhere.
  virtual Status allgatherInto(CollectiveContext& node, const void* own, const OutputBlocks& out);
  virtual Status reduceScatterFrom(CollectiveContext& node, const InputBlocks& in, void* out);
  // The node's rooted collectives (leaders), and the whole collectives a
  // single-node communicator runs on a node provider. By default the
  // point-to-point algorithms: binomial trees, the ring, dissemination.
  // recv is written on root only.
  virtual Status reduce(CollectiveContext& node, const void* send, void* recv, size_t count, int root);
  // buf holds the data on root and receives it everywhere else.
  virtual Status broadcast(CollectiveContext& node, void* buf, size_t count, int root);
  // The same with root's data in send (it may be recv): by default copied
  // into recv first; a provider may do both at once.
  virtual Status broadcastFrom(CollectiveContext& node, const void* send, void* recv, size_t count, int root);
  virtual Status allreduce(CollectiveContext& node, const void* send, void* recv, size_t count);
  virtual Status barrier(CollectiveContext& node);
  // Block j (blockCount elements) of send goes to local rank j, block j of
  // recv comes from it; send is recv (in place) or does not overlap it. The
  // default stages an in-place send first, as pairwise exchanges need.
  virtual Status alltoall(CollectiveContext& node, const void* send, void* recv, size_t blockCount);
};

// The ring algorithms over the node's ranks.
class RingNodePhase final : public NodePhase {
 public:
  bool readsStrided() const override { return true; }
  Status reduceScatter(CollectiveContext& node, const void* send, void* out, const ChunkLayout& blocks,
                       void* partial) override;
  Status allgather(CollectiveContext& node, void* buf, const ChunkLayout& blocks) override;
};

struct Hierarchy {
  NodePhase* node = nullptr;  // null: the ring
  DataSpace* rail = nullptr;  // null: the data space itself
};

}  // namespace fairway
