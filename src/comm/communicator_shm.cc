// Attaching a communicator to its node's shared-memory segment, at
// creation. Every communicator (a split's too) gets a segment of its own:
// its local ranks, its chunk size, counters that start at zero, and no
// collective of another communicator in its rounds.
#include <algorithm>
#include <cstring>

#include "comm/communicator.h"
#include "core/config_parse.h"
#include "core/log.h"
#include "providers/shm/shm_node.h"

namespace fairway {
namespace {

// What the node's leader tells its local ranks: the segment's name, or why
// there is none.
struct SegmentRecord {
  int32_t created = 0;
  uint32_t reserved = 0;
  uint64_t chunkBytes = 0;  // the leader's choice, which followers that were not given one take
  char name[92] = {};
  char reason[412] = {};
};

void setText(char* dst, size_t size, const std::string& text) {
  std::snprintf(dst, size, "%s", text.c_str());
}

}  // namespace

Status Communicator::attachSharedMemory() {
  // Three collective numbers on every rank, used or not: the leader's
  // record to its node, whether every local rank mapped the segment, and
  // whether every one may read every other's memory (single copies).
  const uint32_t base = nextSequence_;
  nextSequence_ += 3;
  const int node = layout_.nodeOf(rank());
  const std::vector<int>& nodeRanks = layout_.ranksOfNode(node);
  const int localRank = layout_.localRankOf(rank());
  const int local = static_cast<int>(nodeRanks.size());
  std::string skip;
  if (local < 2) skip = "one rank on this node";
  if (!plan_.hostSharedMemory) skip = plan_.hostIntraReason;
  if (!skip.empty()) {
    if (localRank == 0 && local > 1) FW_LOG(Info, Init, "node %s: no shared-memory segment (%s): host collectives "
                                                        "inside it run over UCX", layout_.nodeName(node).c_str(),
                                            skip.c_str());
    return Status::ok();
  }
  // Every round needs a whole element of every rank's share. The leader's
  // pick is the node's: ranks may count the host's ranks differently (the
  // most of any communicator their process has joined).
  auto chunkFor = [&](size_t chunk) { return std::max(chunk, static_cast<size_t>(local) * 64); };
  size_t chunkBytes = chunkFor(config_.shmChunkBytesSet
                                   ? config_.shmChunkBytes
                                   : SharedMemoryNode::defaultChunkBytes(local, messenger_->yieldsWhenIdle()));
  size_t bytes = SharedMemoryNode::segmentBytes(local, chunkBytes);

  SegmentRecord record;
  std::unique_ptr<SharedMemoryNode> shm;
  auto adopt = [&](ShmSegment segment) {
    shm = std::make_unique<SharedMemoryNode>(std::move(segment), localRank, nodeRanks, chunkBytes, *messenger_,
                                             config_, messenger_->yieldsWhenIdle());
  };
  // The minimum of every local rank's answer, over UCX.
  Reserved exchange;
  exchange.chosen = true;
  exchange.selection.algorithm = Algorithm::RecursiveDoubling;
  auto everyRank = [&](int32_t mine, uint32_t sequence, const char* what, int32_t* out) {
    CollectiveArgs min;
    min.kind = CollectiveKind::AllReduce;
    min.datatype = fwInt32;
    min.op = fwMin;
    min.count = 1;
    min.send = &mine;
    min.recv = out;
    return execute(min, sequence, nodeRanks, exchange).withContext(what);
  };
  if (localRank == 0) {
    ShmSegment segment;
    Status created = ShmSegment::create(bytes, &segment);
    record.created = created.isOk() ? 1 : 0;
    record.chunkBytes = chunkBytes;
    setText(record.name, sizeof(record.name), segment.name());
    setText(record.reason, sizeof(record.reason), created.message());
    if (created.isOk()) {
      adopt(std::move(segment));
      shm->format();  // the broadcast below orders this before every follower's read
      shm->publishAddress();
    }
  }
  Reserved tree;
  tree.chosen = true;
  tree.selection.algorithm = Algorithm::Binomial;
  CollectiveArgs args;
  args.kind = CollectiveKind::Broadcast;
  args.datatype = fwUint8;
  args.count = sizeof(record);
  args.root = 0;
  args.send = args.recv = &record;
  FW_RETURN_IF_ERROR(execute(args, base, nodeRanks, tree).withContext("sharing the node's segment name"));
  record.name[sizeof(record.name) - 1] = record.reason[sizeof(record.reason) - 1] = '\0';

  std::string why = record.created ? "" : record.reason;
  bool failedHere = localRank == 0 && !record.created;
  if (record.created && localRank != 0) {
    if (!config_.shmChunkBytesSet) {  // one set here and not alike fails the header's check below
      chunkBytes = chunkFor(record.chunkBytes);
      bytes = SharedMemoryNode::segmentBytes(local, chunkBytes);
    }
    ShmSegment segment;
    Status opened = ShmSegment::open(record.name, bytes, &segment);
    if (opened.isOk()) {
      adopt(std::move(segment));
      opened = shm->checkFormat();
      if (!opened.isOk()) shm.reset();
      if (shm) shm->publishAddress();
    }
    if (!opened.isOk()) {
      why = "rank " + std::to_string(rank()) + ": " + opened.message();
      failedHere = true;
    }
  }
  int32_t everyone = 0;
  FW_RETURN_IF_ERROR(everyRank(shm ? 1 : 0, base + 1, "attaching the node's segment", &everyone));
  if (shm) shm->unlinkName();  // the leader's: every local rank has mapped it or given up
  if (everyone != 1) {
    // A rank could not map it: the node's collectives run over UCX. The
    // leader and any rank that failed itself say why.
    if (localRank == 0 || failedHere) {
      FW_LOG(Warn, Init, "rank %d: no shared-memory segment for node %s: %s; host collectives inside the node "
             "run over UCX", rank(), layout_.nodeName(node).c_str(),
             why.empty() ? "another rank of this node could not map it" : why.c_str());
    }
    return Status::ok();
  }
  // The windows every rank computes alike: from the same variable, or
  // from the node's rank count, whether it holds a CPU per rank, the kind
  // of CPU and, where the windows depend on it, how far apart the ranks'
  // cores are, measured here by both and agreed (the least of theirs).
  using Window = SharedMemoryNode::SizeWindow;
  using Windows = SharedMemoryNode::SingleCopyWindows;
  const bool oversubscribed = messenger_->yieldsWhenIdle();
  const bool intel = cpuIsIntel();
  const auto windowsFor = [&](SharedMemoryNode::Cores cores) {
    if (!config_.shmSingleCopySet) return SharedMemoryNode::defaultSingleCopyWindows(local, oversubscribed, cores);
    const Window chosen{config_.shmSingleCopyMin, config_.shmSingleCopyMax};
    return Windows{chosen, chosen, chosen, chosen, chosen, SharedMemoryNode::defaultStagesAlltoallInPlace(cores)};
  };
  const Windows near = windowsFor(SharedMemoryNode::coresOf(intel, 0));
  const Windows far = windowsFor(SharedMemoryNode::coresOf(intel, SharedMemoryNode::kFarRoundTripNs));
  const bool measures = !(near == far);  // else nothing depends on the round trip
  // Capped so that 1 + it fits the int32 below (a rank stopped while it
  // measures could make a batch last any time).
  const uint32_t roundTripNs = measures ? std::min<uint32_t>(shm->measureRoundTripNs(), 1000000) : 0;
  const bool wanted = near.any() || far.any();
  // 0: no single copies; else 1 + the round trip (0: not measured).
  int32_t agreed = 0;
  FW_RETURN_IF_ERROR(everyRank(wanted && shm->canReadPeers() ? 1 + static_cast<int32_t>(roundTripNs) : 0, base + 2,
                               "checking single-copy reads", &agreed));
  const bool readable = agreed > 0;
  const uint32_t agreedRoundTripNs = readable ? static_cast<uint32_t>(agreed - 1) : 0;
  const Windows windows = windowsFor(SharedMemoryNode::coresOf(intel, agreedRoundTripNs));
  if (readable) shm->enableSingleCopy(windows);
  if (localRank == 0) {
    const auto sizes = [](Window w) {
      return w.min == 0 ? std::string("none")
             : w.max >= kNoUpperEnd ? "from " + byteText(w.min)
                                    : "of " + byteText(w.min) + "-" + byteText(w.max);
    };
    const std::string cores =
        !measures                ? std::string()
        : agreedRoundTripNs == 0 ? " (the cores' round trip not measured: near)"
                                 : " (the cores' round trip " + std::to_string(agreedRoundTripNs) + " ns: " +
                                       (agreedRoundTripNs >= SharedMemoryNode::kFarRoundTripNs ? "far" : "near") +
                                       ")";
    const size_t stagedUpTo = shm->alltoallStagedBlockBytes();
    const std::string staged = windows.alltoall.min != 0 && stagedUpTo >= windows.alltoall.min
                                   ? " (in place staged in the segment up to " + byteText(stagedUpTo) + ")"
                                   : "";
    const std::string singleCopy =
        readable ? "allgather blocks " + sizes(windows.allgather) + ", all-to-all blocks " +
                            sizes(windows.alltoall) + staged + ", broadcasts " + sizes(windows.broadcast) +
                            ", allreduces " + sizes(windows.allreduce) + ", reduce-scatters " +
                            sizes(windows.reduceScatter) + cores
        : !wanted     ? std::string(config_.shmSingleCopySet ? "off (FAIRWAY_SHM_SINGLE_COPY_BYTES=0)"
                                                             : "off (measured slower for this node's ranks)")
                      : "off (a rank may not read another's memory: ptrace permission)";
    FW_LOG(Info, Init, "node %s: shared-memory segment of %zu bytes for %d ranks (chunks of %zu bytes), "
           "unlinked once mapped; single-copy reads: %s; results stream past the caches from %s of the node's "
           "outputs (%s)", layout_.nodeName(node).c_str(), bytes, local, chunkBytes, singleCopy.c_str(),
           byteText(shm->streamingNodeBytes()).c_str(),
           config_.shmStreamBytes != 0 ? "FAIRWAY_SHM_STREAM_BYTES" : "its last-level cache");
  }
  shm_ = std::move(shm);
  selector_.setSharedMemory(true);
  return Status::ok();
}

}  // namespace fairway
