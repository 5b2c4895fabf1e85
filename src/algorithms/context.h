// What an algorithm works with: a group of ranks (the communicator, or a
// subset of it), tagged sends and receives to group members, bounded waits,
// the reduction, and the data space: copies, combinations and scratch in
// the memory the buffers live in (host, or device memory UCX reaches).
// Algorithms see nothing else, so each is written once for both memories.
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/chunk_layout.h"
#include "algorithms/data_space.h"
#include "algorithms/node_phase.h"
#include "algorithms/staged_wire.h"
#include "core/pipeline_settings.h"
#include "core/reducer.h"
#include "p2p/message_port.h"
#include "p2p/scratch.h"
#include "p2p/tags.h"
#include "topo/rank_layout.h"

namespace fairway {

class CollectiveContext {
 public:
  // groupRanks maps group index to communicator rank; empty means the whole
  // communicator in rank order.
  CollectiveContext(MessagePort& messenger, Scratch& scratch, DataSpace& space, const std::vector<int>& groupRanks,
                    uint32_t sequence, uint8_t signature, size_t elementSize, const Reducer* reducer,
                    PipelineSettings pipeline)
      : messenger_(messenger), scratch_(scratch), space_(space), groupRanks_(groupRanks), sequence_(sequence),
        signature_(signature), elementSize_(elementSize), reducer_(reducer), pipeline_(pipeline) {
    if (groupRanks_.empty()) {
      rank_ = messenger.rank();
      size_ = messenger.size();
    } else {
      size_ = static_cast<int>(groupRanks_.size());
      for (int i = 0; i < size_; ++i) if (groupRanks_[i] == messenger.rank()) rank_ = i;
    }
  }

  // The same collective over a subset of the communicator's ranks (given
  // as communicator ranks, which must outlive the result) with its own
  // reducer: how composite algorithms run their phases.
  CollectiveContext over(const std::vector<int>& groupRanks, const Reducer* reducer) const {
    CollectiveContext sub(messenger_, scratch_, space_, groupRanks, sequence_, signature_, elementSize_, reducer,
                          pipeline_);
    sub.hierarchy_ = hierarchy_;
    sub.wire_ = wire_;
    return sub;
  }
  // The same collective moving elements of another size: a compressed
  // collective's plain phases over its wire format.
  CollectiveContext withElementSize(size_t elementSize) const {
    CollectiveContext other(messenger_, scratch_, space_, groupRanks_, sequence_, signature_, elementSize, reducer_,
                            pipeline_);
    other.hierarchy_ = hierarchy_;
    other.layout_ = layout_;
    other.wire_ = wire_;
    return other;
  }
  // Who serves a hierarchical algorithm's phases (node_phase.h); by
  // default the ring inside nodes and the data space along rails.
  void setHierarchy(const Hierarchy& hierarchy) { hierarchy_ = hierarchy; }
  const Hierarchy& hierarchy() const { return hierarchy_; }
  NodePhase& nodePhase() { return hierarchy_.node != nullptr ? *hierarchy_.node : ringNodePhase_; }
  DataSpace& railSpace() { return hierarchy_.rail != nullptr ? *hierarchy_.rail : space_; }
  // Whether the rail phase works in other memory than the data, so slices
  // are copied between the two at the phase boundaries.
  bool railStaged() const { return hierarchy_.rail != nullptr && hierarchy_.rail != &space_; }
  char* railBytes(size_t bytes) { return railSpace().scratch(ScratchRegion::Rail, bytes); }
  // Messages of data the transport cannot reach cross through the wire's
  // bounce buffers (staged_wire.h); null: they go as they are.
  void setWire(StagedWire* wire) { wire_ = wire; }
  // Which node each rank sits on, when this context is a whole communicator.
  const RankLayout* layout() const { return layout_; }
  void setLayout(const RankLayout* layout) { layout_ = layout; }

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The communicator's number for this collective (every phase shares it).
  uint32_t sequence() const { return sequence_; }
  uint8_t signature() const { return signature_; }
  size_t elementSize() const { return elementSize_; }
  const Reducer& reducer() const { return *reducer_; }

  // count Pending slots, all marked done, valid until the next call; the
  // outer ones stay valid while the algorithms a composite one runs use
  // pendings().
  Pending* pendings(size_t count) { return scratch_.pendings(count); }
  Pending* outerPendings(size_t count) { return scratch_.outerPendings(count); }

  // Data in the buffers' memory, counted in elements of this collective.
  bool onDevice() const { return space_.onDevice(); }
  DataSpace& dataSpace() { return space_; }
  Status copy(void* dst, const void* src, size_t elems) { return space_.copy(dst, src, elems * elementSize_); }
  Status combine(const Reducer& reducer, void* dst, const void* a, const void* b, size_t elems) {
    return space_.combine(reducer, dst, a, b, elems);
  }
  Status finalize(const Reducer& reducer, void* buf, size_t elems) { return space_.finalize(reducer, buf, elems); }
  // Scratch in the buffers' memory: the algorithm's own; the collective
  // layer's staging (which it hands to an algorithm); a composite
  // algorithm's, valid while the algorithms it runs use scratchBytes().
  char* scratchBytes(size_t bytes) { return space_.scratch(ScratchRegion::Algorithm, bytes); }
  char* stagingBytes(size_t bytes) { return space_.scratch(ScratchRegion::Staging, bytes); }
  char* outerBytes(size_t bytes) { return space_.scratch(ScratchRegion::Outer, bytes); }
  // Pipeline segment in elements (at least one).
  Segments segments() const {
    size_t elems = pipeline_.segmentBytes / elementSize_;
    return Segments{elems > 0 ? elems : 1};
  }
  int pipelineDepth() const { return pipeline_.depth; }
  const PipelineSettings& pipeline() const { return pipeline_; }

  // step distinguishes messages between one pair within a collective; both
  // sides must number them alike (only its low 10 bits travel).
  Status send(int peer, const void* buf, size_t elems, uint32_t step, Pending* out) {
    const int dest = commRank(peer);
    const uint64_t tag = Tag::collective(messenger_.rank(), sequence_, signature_, step);
    const size_t bytes = elems * elementSize_;
    if (wire_ == nullptr || bytes == 0) return messenger_.send(dest, buf, bytes, tag, out, space_.memoryType());
    char* bounce = nullptr;
    FW_RETURN_IF_ERROR(wire_->acquire(bytes, &bounce));
    Status st = space_.copy(bounce, buf, bytes);
    if (st.isOk()) st = messenger_.send(dest, bounce, bytes, tag, out);
    if (!st.isOk()) {
      wire_->release(bounce);
      return st;
    }
    wire_->track(out, bounce, nullptr, bytes);
    return st;
  }
  Status recv(int peer, void* buf, size_t elems, uint32_t step, Pending* out) {
    const int source = commRank(peer);
    const uint64_t tag = Tag::collective(source, sequence_, signature_, step);
    const size_t bytes = elems * elementSize_;
    if (wire_ == nullptr || bytes == 0) return messenger_.recv(source, buf, bytes, tag, out, space_.memoryType());
    char* bounce = nullptr;
    FW_RETURN_IF_ERROR(wire_->acquire(bytes, &bounce));
    const Status st = messenger_.recv(source, bounce, bytes, tag, out);
    if (!st.isOk()) {
      wire_->release(bounce);
      return st;
    }
    wire_->track(out, bounce, buf, bytes);
    return st;
  }
  // Sends sendElems to `to` while receiving recvElems from `from`; waits for both.
  Status sendRecv(int to, const void* sendBuf, size_t sendElems, int from, void* recvBuf, size_t recvElems,
                  uint32_t step) {
    Pending* p = pendings(2);
    FW_RETURN_IF_ERROR(recv(from, recvBuf, recvElems, step, &p[0]));
    FW_RETURN_IF_ERROR(send(to, sendBuf, sendElems, step, &p[1]));
    return waitAll(p, 2);
  }
  // A staged receive's bytes are in place once its wait returns.
  Status wait(Pending* p) { return waitAll(p, 1); }
  Status waitAll(Pending* list, size_t count) {
    FW_RETURN_IF_ERROR(messenger_.waitAll(list, count));
    return wire_ == nullptr ? Status::ok() : wire_->settle(space_, list, count);
  }

  char* at(void* base, size_t elems) const { return static_cast<char*>(base) + elems * elementSize_; }
  const char* at(const void* base, size_t elems) const { return static_cast<const char*>(base) + elems * elementSize_; }

 private:
  int commRank(int groupIndex) const { return groupRanks_.empty() ? groupIndex : groupRanks_[groupIndex]; }

  MessagePort& messenger_;
  Scratch& scratch_;
  DataSpace& space_;
  const std::vector<int>& groupRanks_;
  uint32_t sequence_;
  uint8_t signature_;
  size_t elementSize_;
  const Reducer* reducer_;
  PipelineSettings pipeline_;
  const RankLayout* layout_ = nullptr;
  Hierarchy hierarchy_;
  StagedWire* wire_ = nullptr;
  RingNodePhase ringNodePhase_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace fairway
