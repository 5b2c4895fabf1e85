#include "comm/device_two_phase.h"

#include <algorithm>

#include "algorithms/chunk_layout.h"

#include "comm/communicator.h"
#include "comm/device_collectives.h"
#include "core/datatype.h"
#include "core/log.h"

namespace fairway {
namespace {

// Slices of about sliceBytes on the host side, where one slice's piece is
// `unitBytes` per element of the sliced dimension.
ChunkLayout hostSlices(size_t elements, size_t unitBytes, size_t sliceBytes) {
  const size_t perSlice = std::max<size_t>(1, sliceBytes / std::max<size_t>(1, unitBytes));
  return ChunkLayout{elements, static_cast<int>(std::max<size_t>(1, (elements + perSlice - 1) / perSlice)), 0};
}

const char* at(const void* base, size_t elements, size_t es) { return static_cast<const char*>(base) + elements * es; }
char* at(void* base, size_t elements, size_t es) { return static_cast<char*>(base) + elements * es; }

}  // namespace

DeviceTwoPhase::SliceBuffers::SliceBuffers(DeviceRuntime& device)
    : hostIn(device, StagingBuffer::Kind::Pinned),
      hostOut(device, StagingBuffer::Kind::Pinned),
      packed(device, StagingBuffer::Kind::Device),
      nodeResult(device, StagingBuffer::Kind::Device) {}

DeviceTwoPhase::DeviceTwoPhase(Communicator& comm, DeviceRuntime& device)
    : comm_(comm), device_(device), timeoutMs_(comm.config().timeoutMs) {}

DeviceTwoPhase::~DeviceTwoPhase() {
  for (auto& b : slices_) {
    if (b && b->ready != nullptr) device_.destroyEvent(b->ready);
  }
  // Every rank frees its sub-communicators at the same point (the parent's
  // destruction), so their closing barriers meet.
  for (Communicator* sub : {node_.get(), rail_.get()}) {
    if (sub == nullptr || aborted_) continue;
    Status st = sub->destroy();
    if (!st.isOk()) FW_LOG(Warn, Coll, "closing a two-phase sub-communicator: %s", st.message().c_str());
  }
}

void DeviceTwoPhase::abort() {
  aborted_ = true;
  if (node_) node_->abort();
  if (rail_) rail_->abort();
}

bool DeviceTwoPhase::handles(const CollectiveArgs& a) const {
  const RankLayout& layout = comm_.layout();
  if (!comm_.plan().deviceTwoPhase || layout.nodeCount() < 2 || !layout.uniform()) return false;
  const bool twoPhaseKind = a.kind == CollectiveKind::AllReduce || a.kind == CollectiveKind::ReduceScatter ||
                            a.kind == CollectiveKind::AllGather;
  return twoPhaseKind && ncclRuns(comm_.machine().nccl, a);
}

// Collective over the parent: every rank splits at its first two-phase call.
Status DeviceTwoPhase::ensureGroups() {
  if (node_ && rail_) return Status::ok();
  FW_RETURN_IF_ERROR(twoPhaseGroups(comm_.layout(), comm_.rank(), &groups_));
  FW_RETURN_IF_ERROR(comm_.split(groups_.m, groups_.d, &node_).withContext("forming the node communicator"));
  FW_RETURN_IF_ERROR(comm_.split(groups_.d, groups_.m, &rail_).withContext("forming the rail communicator"));
  for (auto& b : slices_) {
    b = std::make_unique<SliceBuffers>(device_);
    FW_RETURN_IF_ERROR(device_.createEvent(&b->ready));
  }
  FW_LOG(Info, Coll, "rank %d: device two-phase over node %d (%d ranks, device path %s) and rail %d (%d ranks)",
         comm_.rank(), groups_.m, groups_.D, devicePathName(node_->plan().deviceCollectives), groups_.d, groups_.M);
  return Status::ok();
}

// The node phase, on the stream: NCCL when the node communicator's plan has it.
Status DeviceTwoPhase::nodeCollective(CollectiveKind kind, const void* send, void* recv, size_t count,
                                      const CollectiveArgs& a, void* stream) {
  CollectiveArgs args = a;
  args.kind = kind;
  args.send = send;
  args.recv = recv;
  args.count = count;
  return node_->deviceCollective(args, stream);
}

// The rail phase, on pinned host buffers; returns when done.
Status DeviceTwoPhase::railCollective(CollectiveKind kind, const void* send, void* recv, size_t count,
                                      const CollectiveArgs& a) {
  CollectiveArgs args = a;
  args.kind = kind;
  args.send = send;
  args.recv = recv;
  args.count = count;
  return rail_->collective(args);
}

// The pipeline every collective here runs: slice s+1's device phase
// (prepare, which ends by marking its set ready) is enqueued before the host
// finishes slice s, once the stream has made slice s's pinned input ready.
template <typename Prepare, typename Finish>
Status DeviceTwoPhase::pipelineSlices(int slices, Prepare prepare, Finish finish) {
  FW_RETURN_IF_ERROR(prepare(0));
  for (int s = 0; s < slices; ++s) {
    if (s + 1 < slices) FW_RETURN_IF_ERROR(prepare(s + 1));
    SliceBuffers& b = *slices_[s % 2];
    FW_RETURN_IF_ERROR(waitReady(b));
    FW_RETURN_IF_ERROR(finish(s, b));
  }
  return Status::ok();
}

Status DeviceTwoPhase::markReady(SliceBuffers& b, void* stream) { return device_.recordEvent(b.ready, stream); }
Status DeviceTwoPhase::waitReady(SliceBuffers& b) { return device_.waitEvent(b.ready, timeoutMs_); }

Status DeviceTwoPhase::run(const CollectiveArgs& a, void* stream) {
  FW_RETURN_IF_ERROR(ensureGroups());
  switch (a.kind) {
    case CollectiveKind::AllReduce: FW_RETURN_IF_ERROR(allReduce(a, stream)); break;
    case CollectiveKind::ReduceScatter: FW_RETURN_IF_ERROR(reduceScatter(a, stream)); break;
    case CollectiveKind::AllGather: FW_RETURN_IF_ERROR(allGather(a, stream)); break;
    default: return Status(fwInternalError, "no device two-phase form of this collective");
  }
  return device_.synchronize(stream, timeoutMs_);
}

// Reduce-scatter: rank (m, d) ends with chunk r of everyone's input.
//  node phase: the slice's blocks are packed on the GPU by (local rank,
//    node) of their owners, and NCCL reduce-scatters them over the node:
//    local rank d gets its node's sums of rail d's M blocks;
//  rail phase: a host reduce-scatter over the rail adds the nodes' sums;
//    block m is this rank's, copied back into recv.
Status DeviceTwoPhase::reduceScatter(const CollectiveArgs& a, void* stream) {
  const TwoPhaseGroups& g = groups_;
  const size_t es = datatypeSize(a.datatype), c = a.count;
  const ChunkLayout slices = hostSlices(c, g.M * es, comm_.config().pipeline.stagingSliceBytes);
  const size_t maxLen = slices.chunkCount(0);
  for (auto& b : slices_) {
    FW_RETURN_IF_ERROR(b->packed.reserve(g.D * g.M * maxLen * es));
    FW_RETURN_IF_ERROR(b->nodeResult.reserve(g.M * maxLen * es));
    FW_RETURN_IF_ERROR(b->hostIn.reserve(g.M * maxLen * es));
    FW_RETURN_IF_ERROR(b->hostOut.reserve(maxLen * es));
  }
  auto nodePhase = [&](int s) -> Status {
    SliceBuffers& b = *slices_[s % 2];
    const size_t from = slices.chunkOffset(s), len = slices.chunkCount(s);
    for (int d = 0; d < g.D; ++d) {
      for (int m = 0; m < g.M; ++m) {
        FW_RETURN_IF_ERROR(device_.copyAsync(b.packed.data() + (static_cast<size_t>(d) * g.M + m) * len * es,
                                             at(a.send, static_cast<size_t>(g.rankAt(m, d)) * c + from, es),
                                             len * es, stream));
      }
    }
    FW_RETURN_IF_ERROR(nodeCollective(CollectiveKind::ReduceScatter, b.packed.data(), b.nodeResult.data(),
                                      g.M * len, a, stream));
    FW_RETURN_IF_ERROR(device_.copyAsync(b.hostIn.data(), b.nodeResult.data(), g.M * len * es, stream));
    return markReady(b, stream);
  };
  if (c == 0) return Status::ok();
  return pipelineSlices(slices.n, nodePhase, [&](int s, SliceBuffers& b) -> Status {
    const size_t len = slices.chunkCount(s);
    FW_RETURN_IF_ERROR(railCollective(CollectiveKind::ReduceScatter, b.hostIn.data(), b.hostOut.data(), len, a));
    return device_.copyAsync(at(a.recv, slices.chunkOffset(s), es), b.hostOut.data(), len * es, stream);
  });
}

// Allreduce: the buffer is cut into slices of D pieces; in each, NCCL
// reduce-scatters over the node (local rank d gets piece d), the host
// allreduces piece d over the rail, and NCCL allgathers the pieces back
// in place. What does not divide by D goes through allReduceTail.
Status DeviceTwoPhase::allReduce(const CollectiveArgs& a, void* stream) {
  const TwoPhaseGroups& g = groups_;
  const size_t es = datatypeSize(a.datatype);
  const size_t pieces = a.count / g.D;  // elements of each local rank's share
  const ChunkLayout slices = hostSlices(pieces, es, comm_.config().pipeline.stagingSliceBytes);
  const size_t maxLen = slices.chunkCount(0);
  for (auto& b : slices_) FW_RETURN_IF_ERROR(b->hostIn.reserve(maxLen * es));
  // Slice s covers elements [D * from, D * (from + len)); local rank d's piece starts at D * from + d * len.
  auto piece = [&](int s) { return g.D * slices.chunkOffset(s) + g.d * slices.chunkCount(s); };
  auto nodePhase = [&](int s) -> Status {
    SliceBuffers& b = *slices_[s % 2];
    const size_t len = slices.chunkCount(s), first = g.D * slices.chunkOffset(s);
    FW_RETURN_IF_ERROR(nodeCollective(CollectiveKind::ReduceScatter, at(a.send, first, es),
                                      at(a.recv, piece(s), es), len, a, stream));
    FW_RETURN_IF_ERROR(device_.copyAsync(b.hostIn.data(), at(a.recv, piece(s), es), len * es, stream));
    return markReady(b, stream);
  };
  if (pieces > 0) {
    FW_RETURN_IF_ERROR(pipelineSlices(slices.n, nodePhase, [&](int s, SliceBuffers& b) -> Status {
      const size_t len = slices.chunkCount(s);
      FW_RETURN_IF_ERROR(railCollective(CollectiveKind::AllReduce, b.hostIn.data(), b.hostIn.data(), len, a));
      FW_RETURN_IF_ERROR(device_.copyAsync(at(a.recv, piece(s), es), b.hostIn.data(), len * es, stream));
      return nodeCollective(CollectiveKind::AllGather, at(a.recv, piece(s), es),
                            at(a.recv, g.D * slices.chunkOffset(s), es), len, a, stream);
    }));
  }
  return allReduceTail(a, g.D * pieces, stream);
}

Status DeviceTwoPhase::allReduceTail(const CollectiveArgs& a, size_t from, void* stream) {
  const size_t es = datatypeSize(a.datatype), tail = a.count - from;
  if (tail == 0) return Status::ok();
  SliceBuffers& b = *slices_[0];
  FW_RETURN_IF_ERROR(b.hostOut.reserve(tail * es));
  FW_RETURN_IF_ERROR(device_.copyAsync(b.hostOut.data(), at(a.send, from, es), tail * es, stream));
  FW_RETURN_IF_ERROR(device_.synchronize(stream, timeoutMs_));
  CollectiveArgs host = a;
  host.send = host.recv = b.hostOut.data();
  host.count = tail;
  FW_RETURN_IF_ERROR(comm_.collective(host));
  return device_.copyAsync(at(a.recv, from, es), b.hostOut.data(), tail * es, stream);
}

// Allgather: the host allgathers this rank's slice over the rail (one
// block per node), NCCL allgathers those over the node (blocks by local
// rank, then node), and the GPU copies each block to its owner's place.
Status DeviceTwoPhase::allGather(const CollectiveArgs& a, void* stream) {
  const TwoPhaseGroups& g = groups_;
  const size_t es = datatypeSize(a.datatype), c = a.count;
  const ChunkLayout slices = hostSlices(c, g.M * es, comm_.config().pipeline.stagingSliceBytes);
  const size_t maxLen = slices.chunkCount(0);
  for (auto& b : slices_) {
    FW_RETURN_IF_ERROR(b->hostIn.reserve(maxLen * es));
    FW_RETURN_IF_ERROR(b->hostOut.reserve(g.M * maxLen * es));
    FW_RETURN_IF_ERROR(b->packed.reserve(g.M * maxLen * es));
    FW_RETURN_IF_ERROR(b->nodeResult.reserve(g.D * g.M * maxLen * es));
  }
  auto load = [&](int s) -> Status {
    SliceBuffers& b = *slices_[s % 2];
    FW_RETURN_IF_ERROR(device_.copyAsync(b.hostIn.data(), at(a.send, slices.chunkOffset(s), es),
                                         slices.chunkCount(s) * es, stream));
    return markReady(b, stream);
  };
  if (c == 0) return Status::ok();
  return pipelineSlices(slices.n, load, [&](int s, SliceBuffers& b) -> Status {
    const size_t from = slices.chunkOffset(s), len = slices.chunkCount(s);
    FW_RETURN_IF_ERROR(railCollective(CollectiveKind::AllGather, b.hostIn.data(), b.hostOut.data(), len, a));
    FW_RETURN_IF_ERROR(device_.copyAsync(b.packed.data(), b.hostOut.data(), g.M * len * es, stream));
    FW_RETURN_IF_ERROR(nodeCollective(CollectiveKind::AllGather, b.packed.data(), b.nodeResult.data(), g.M * len, a,
                                      stream));
    for (int d = 0; d < g.D; ++d) {
      for (int m = 0; m < g.M; ++m) {
        FW_RETURN_IF_ERROR(device_.copyAsync(at(a.recv, static_cast<size_t>(g.rankAt(m, d)) * c + from, es),
                                             b.nodeResult.data() + (static_cast<size_t>(d) * g.M + m) * len * es,
                                             len * es, stream));
      }
    }
    return Status::ok();
  });
}

}  // namespace fairway
