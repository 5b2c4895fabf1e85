// The shared-memory provider of host collectives among the ranks of one
// node. Every local rank owns a slot in the node's segment: a control block
// (its phase counter, the descriptors of its last kRoundSlots rounds, the
// collective it last entered, the inline rounds that carry a small
// reduction's input),
// an input area of two chunks of FAIRWAY_SHM_CHUNK_BYTES (and some slack)
// that rounds take in turn (round_ring.h) and double-buffered result areas.
// A collective is cut into rounds of at most one chunk per rank; in each
// round every rank copies its part into its own slot, then reduces its
// share of the round from every slot (each rank reduces a different slice,
// in the same rank order everywhere), or copies what it needs out of the
// others' slots. Ranks synchronise by phase counters in the segment: a
// bounded spin, then a futex sleep, every wait bounded by
// FAIRWAY_TIMEOUT_MS and watching for dead local ranks and peers' failure
// notices (Messenger::checkHealth).
//
// Nothing read from the segment is trusted beyond the counters: sizes and
// offsets are what this rank computed (a round's offset into its region,
// the one number a peer publishes, is taken only within the region's
// slack), and each round's descriptor (round, collective number, kind,
// type, op, root, count) must match this rank's before it reads a peer's
// data, else fwCollectiveMismatch.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/node_phase.h"
#include "p2p/messenger.h"
#include "providers/shm/peer_memory.h"
#include "providers/shm/round_ring.h"
#include "providers/shm/shm_segment.h"

namespace fairway {

class SharedMemoryNode final : public NodePhase {
 public:
  // The segment's size for `ranks` local ranks and chunks of chunkBytes.
  static size_t segmentBytes(int ranks, size_t chunkBytes);
  // The chunk where FAIRWAY_SHM_CHUNK_BYTES does not say: rounds of about
  // 2 MiB in all, each rank's chunk 256 KiB to 1 MiB, or with more ranks
  // than CPUs (oversubscribed) rounds of about 16 MiB, each rank's chunk
  // 256 KiB to 4 MiB (see the definition).
  static size_t defaultChunkBytes(int ranks, bool oversubscribed);
  // Takes a mapped segment; the leader (localRank 0) formats it first.
  // nodeRanks: the communicator ranks of the node, by local rank.
  SharedMemoryNode(ShmSegment segment, int localRank, std::vector<int> nodeRanks, size_t chunkBytes,
                   Messenger& messenger, const Config& config, bool yieldWhenIdle);
  // The leader writes the header; a follower checks it against its own
  // parameters (one compiled with other settings cannot attach).
  void format();
  Status checkFormat() const;
  // Removes the segment's name once every local rank has mapped it (the
  // creator's call; a no-op elsewhere).
  void unlinkName() { segment_.unlink(); }
  // Single-copy reads (Linux cross-memory attach, process_vm_readv):
  // publish this block's address, then, once every rank has, check that
  // this process may read every peer (ptrace access: same user, and Yama
  // allowing it). The node uses them only where every rank can.
  void publishAddress();
  bool canReadPeers() const;
  // A cache line's round trip between the cores of the node's two ranks,
  // in ns: both ranks call it together and hand a line of the segment
  // back and forth (shm_round_trip.h). 0 where the node has not two
  // ranks, or no batch of trips ran whole within kRoundTripBoundMs.
  uint32_t measureRoundTripNs();
  static constexpr int kRoundTripBoundMs = 20;
  // Sizes, inclusive, whose transfers read the owner's buffer in place;
  // an empty window (the default) never does.
  struct SizeWindow {
    size_t min = 0, max = 0;
    bool holds(size_t bytes) const { return min != 0 && bytes >= min && bytes <= max; }
    bool operator==(const SizeWindow& o) const { return min == o.min && max == o.max; }
  };
  // What the defaults below depend on besides the ranks, passed in so
  // that a test checks every kind: whether the CPUs are Intel's
  // (cpuIsIntel() where they run), and whether the node's two ranks sit
  // on cores far apart: a cache line's round trip between them
  // (measureRoundTripNs) of kFarRoundTripNs or more.
  struct Cores {
    bool intel = false;
    bool far = false;
  };
  // At or above this round trip the segment's rounds, which hand lines
  // between the ranks' cores at every step, lose to the kernel's single
  // copy at sizes where they win between near cores. On AMD EPYC guests
  // whose two cores measured 120-180 ns at one time and 490-505 ns at
  // another (the host had moved them), the rounds ran about 3 times as
  // slow in the second state and the reads about as fast.
  static constexpr uint32_t kFarRoundTripNs = 300;
  // Which Cores a node's measured round trip makes (0: not measured, near).
  static Cores coresOf(bool intel, uint32_t roundTripNs) {
    return {intel, roundTripNs >= kFarRoundTripNs};
  }
  // Where FAIRWAY_SHM_SINGLE_COPY_BYTES does not say: allgather blocks of
  // 8 KiB to 16 MiB with 2 ranks and a CPU each on Intel CPUs, on others
  // 256 KiB to 2 MiB between near cores and 16 KiB to 4 MiB between far
  // ones; nothing otherwise (see the definition).
  static SizeWindow defaultAllgatherSingleCopy(int ranks, bool oversubscribed, Cores cores);
  // All-to-all blocks: 16 KiB to 16 MiB with 2 ranks and a CPU each on
  // Intel CPUs, on others 512 KiB to 2 MiB between near cores and 16 KiB
  // to 4 MiB between far ones; with more ranks than CPUs from 64 KiB (128
  // KiB on others; 32 KiB at 8 ranks or more), with no upper end (see the
  // definition).
  static SizeWindow defaultAlltoallSingleCopy(int ranks, bool oversubscribed, Cores cores);
  // Broadcasts likewise: 2 ranks with a CPU each, 32 KiB to 32 MiB on
  // Intel CPUs, on others 2 to 3 MiB between near cores and 16 KiB to 16
  // MiB between far ones (see the definition). One window whether the
  // root's call is in place or not, as the other ranks cannot tell.
  static SizeWindow defaultBroadcastSingleCopy(int ranks, bool oversubscribed, Cores cores);
  // Allreduces (the buffer's size): 2 ranks with a CPU each, 2 to 8 MiB
  // (on CPUs other than Intel's between near cores 2 to 3 MiB); 3 or 4
  // ranks on fewer CPUs from 4 MiB, reading only the inputs in place (see
  // the definition).
  static SizeWindow defaultAllreduceSingleCopy(int ranks, bool oversubscribed, Cores cores);
  // Reduce-scatters (the whole input): 2 ranks with a CPU each on far
  // cores of CPUs other than Intel's, 32 KiB to 16 MiB; more ranks than
  // CPUs from 1 MiB (from 4 MiB past 4 ranks); nothing otherwise (see the
  // definition).
  static SizeWindow defaultReduceScatterSingleCopy(int ranks, bool oversubscribed, Cores cores);
  // The windows in use: allgather's and all-to-all's hold the size of one
  // rank's block, broadcast's and allreduce's the buffer's, reduce-scatter's
  // the whole input's.
  // stagesAlltoall: whether an in-place all-to-all in its window stages
  // its blocks in the segment where they fit (alltoallStagedBlockBytes)
  // instead of swapping them with its peers.
  struct SingleCopyWindows {
    SizeWindow allgather, alltoall, broadcast, allreduce, reduceScatter;
    bool stagesAlltoall = false;
    bool any() const {
      return allgather.min || alltoall.min || broadcast.min || allreduce.min || reduceScatter.min;
    }
    bool operator==(const SingleCopyWindows& o) const {
      return allgather == o.allgather && alltoall == o.alltoall && broadcast == o.broadcast &&
             allreduce == o.allreduce && reduceScatter == o.reduceScatter && stagesAlltoall == o.stagesAlltoall;
    }
  };
  // Whether in-place all-to-alls stage their blocks (see the definition).
  static bool defaultStagesAlltoallInPlace(Cores cores);
  // Where the node's outputs together start to stream past the cache
  // (streams()): the last-level cache of this process's CPU, as sysfs
  // under cpuDir (/sys/devices/system/cpu/cpuN) describes it, or
  // kStreamingNodeBytes where it says nothing (see the definition).
  static size_t defaultStreamingNodeBytes(const std::string& cpuDir);
  static size_t defaultStreamingNodeBytes();  // this process's CPU's
  static constexpr size_t kStreamingNodeBytes = size_t{32} << 20;
  size_t streamingNodeBytes() const { return streamingNodeBytes_; }
  // The four defaults above together.
  static SingleCopyWindows defaultSingleCopyWindows(int ranks, bool oversubscribed, Cores cores) {
    return {defaultAllgatherSingleCopy(ranks, oversubscribed, cores),
            defaultAlltoallSingleCopy(ranks, oversubscribed, cores),
            defaultBroadcastSingleCopy(ranks, oversubscribed, cores),
            defaultAllreduceSingleCopy(ranks, oversubscribed, cores),
            defaultReduceScatterSingleCopy(ranks, oversubscribed, cores),
            defaultStagesAlltoallInPlace(cores)};
  }
  void enableSingleCopy(const SingleCopyWindows& windows) {
    singleCopy_ = windows;
    mappedCopies_ = true;
  }
  // From this size (a window's measure), a call outside its collective's
  // single-copy window first agrees whether every rank's buffers that its
  // peers read lie in fwHostMemAlloc allocations; where they do, it reads
  // them in place as in the window, with plain copies (mappedEverywhere).
  static constexpr size_t kMappedFromBytes = size_t{512} << 10;
  // The largest all-to-all block an in-place single-copy call stages in
  // the segment (0: none): where the windows say so, while the node's
  // staged blocks stay within a quarter of its last-level cache and a
  // rank's fit one round (see defaultStagesAlltoallInPlace).
  size_t alltoallStagedBlockBytes() const;
  int localRank() const { return localRank_; }
  int ranks() const { return ranks_; }
  size_t chunkBytes() const { return chunkBytes_; }

  // The communicator's collective #sequence is starting on this rank
  // (every collective, whatever runs it): a rank waiting here for a peer
  // that has entered another collective reports the mismatch.
  void announce(uint32_t sequence, uint8_t signature);

  // NodePhase: the node context's ranks are the local ranks, in order.
  bool readsStrided() const override { return true; }
  Status reduceScatter(CollectiveContext& node, const void* send, void* out, const ChunkLayout& blocks,
                       void* partial) override;
  Status allgather(CollectiveContext& node, void* buf, const ChunkLayout& blocks) override;
  Status allgatherFrom(CollectiveContext& node, const void* own, void* buf, const ChunkLayout& blocks) override;
  // The list forms: copied block by block, so blocks may lie anywhere.
  bool takesBlockLists() const override { return true; }
  Status allgatherInto(CollectiveContext& node, const void* own, const OutputBlocks& out) override;
  Status reduceScatterFrom(CollectiveContext& node, const InputBlocks& in, void* out) override;
  Status reduce(CollectiveContext& node, const void* send, void* recv, size_t count, int root) override;
  Status broadcast(CollectiveContext& node, void* buf, size_t count, int root) override;
  Status broadcastFrom(CollectiveContext& node, const void* send, void* recv, size_t count, int root) override;
  Status allreduce(CollectiveContext& node, const void* send, void* recv, size_t count) override;
  Status barrier(CollectiveContext& node) override;
  Status alltoall(CollectiveContext& node, const void* send, void* recv, size_t blockCount) override;

 private:
  // 24 bytes, so the phase and both parities' descriptors share the
  // first cache line of a control block: a peer's wait reads one line.
  struct Descriptor {
    uint32_t round, sequence;
    uint8_t kind, datatype, op, unused;
    int32_t root;
    uint64_t count;
  };
  // A small reduction's round, per parity: the descriptor and the input
  // travel with the round number on one cache line (two from
  // kInlineHeadBytes on), each line's round written after the rest of
  // it. A peer that reads the round of round g there has the descriptor
  // and the data in the same fetch, where the general rounds take one
  // fetch for the phase and another for the input area.
  struct alignas(64) InlineRound {
    std::atomic<uint32_t> round;  // exactly g once this line holds round g (format: another parity's)
    uint32_t unused;
    Descriptor descriptor;
    char head[32];
    std::atomic<uint32_t> tailRound;  // the same for the second line
    uint32_t unusedTail;
    char tail[56];
  };
  static constexpr size_t kInlineHeadBytes = sizeof(InlineRound::head);
  static constexpr size_t kInlineBytes = kInlineHeadBytes + sizeof(InlineRound::tail);
  // A round that lets its owner run ahead of its readers (runsAhead: a
  // broadcast's) publishes in slot g % kRoundSlots, read on one line by a
  // peer waiting for its arrival: the round number, then what it needs.
  struct alignas(64) RoundSlot {
    std::atomic<uint32_t> arrived;  // exactly g once round g's input is in (format: no round of the slot)
    // Where the round starts in its input region (shiftedInput): below
    // RoundRing::kSlackBytes.
    std::atomic<uint8_t> inputShift;
    Descriptor descriptor;
  };
  // Deep enough that a broadcast's root runs many rounds ahead of its
  // readers (see broadcastFrom).
  static constexpr uint32_t kRoundSlots = 64;
  // The fwHostMemAlloc allocation a published buffer lies in (id 0: none),
  // which its peers map (PeerMappings) and copy with plain loads and stores.
  struct PublishedAllocation {
    std::atomic<uint64_t> id, base, bytes, inode;
    std::atomic<int64_t> fd;
  };
  // Every other round publishes on the phase's line, per parity: a peer
  // waiting for its arrival reads one line, and its owner, which reuses
  // that place two rounds on, waits for every reader of round g - 2.
  struct alignas(128) Control {
    std::atomic<uint32_t> phase;  // 2g+1 once round g's input is in; 2g+2 once its work is done
    std::atomic<uint8_t> inputShift[2];  // as RoundSlot's
    // A single-copy all-to-all's or broadcast's, per parity: 1 when the
    // buffer this rank published is also its output (its call is in
    // place), so that peers in place too swap blocks with it instead of
    // only reading, and a broadcast's root writes part of its readers'.
    std::atomic<uint8_t> publishedInPlace[2];
    Descriptor round[2];
    // Written rarely, on a line of their own.
    alignas(64) std::atomic<uint32_t> sleepers;
    std::atomic<uint32_t> announcedSequence;
    std::atomic<uint32_t> announcedSignature;  // signature + 1; 0: nothing announced yet
    // Where this block sits in its owner's address space (the probe of
    // single-copy reads), and the block peers read in place, per parity.
    std::atomic<uint64_t> selfAddress;
    std::atomic<uint64_t> userBuffer[2];
    std::atomic<uint64_t> userResult[2];  // a single-copy allreduce's output, per parity
    // A single-copy reduce-scatter's list of blocks (the list form), per
    // parity; 0 where userBuffer is the base of blocks cut by the layout.
    std::atomic<uint64_t> userBlockList[2];
    // The allocations userBuffer and userResult lie in, per parity.
    PublishedAllocation bufferAllocation[2];
    PublishedAllocation resultAllocation[2];
    std::atomic<uint8_t> buffersMapped[2];  // mappedEverywhere's answer for this rank, per parity
    InlineRound inlineRound[2];
    RoundSlot slots[kRoundSlots];
    // Handed back and forth between two local ranks at creation
    // (measureRoundTripNs), on a line of its own.
    alignas(64) std::atomic<uint32_t> probe;
  };
  struct alignas(128) Header {
    uint64_t magic;
    uint64_t ranks;
    uint64_t chunkBytes;
  };
  // Kinds in descriptors (the node phase's calls are collectives of their own).
  enum Kind : uint32_t {
    kAllreduce = 1, kReduceScatter, kAllgather, kBroadcast, kReduce, kBarrier,
    kAllgatherInPlace, kBroadcastInPlace,  // single-copy reads of the peers' own buffers
    kAlltoall, kAlltoallInPlace,
    kAllreduceInPlace,  // single-copy reads of the peers' own buffers
    kReduceScatterInPlace,
    kAllreduceReadingInputs,  // rounds whose inputs are read in place
    kMappedCheck,  // whether every rank's buffers are mapped (mappedEverywhere)
    kAllgatherMapped, kAllreduceMapped,  // writes into the peers' mapped outputs (shm_mapped.cc)
  };

  Control& control(int rank) const;
  // Whether rounds of this kind let their owner run ahead, publishing in
  // their slot: a broadcast's, whose root no reader waits for.
  static bool runsAhead(uint8_t kind) { return kind == kBroadcast; }
  // rank's slot of round `round`.
  RoundSlot& slot(int rank, uint32_t round) const { return control(rank).slots[round % kRoundSlots]; }
  // Where rank publishes the current round's descriptor and input shift:
  // its slot or its parity's place, as the round's kind says.
  Descriptor& published(int rank) const {
    return runsAhead(current_.kind) ? slot(rank, round_).descriptor : control(rank).round[round_ % 2];
  }
  std::atomic<uint8_t>& publishedShift(int rank) const {
    return runsAhead(current_.kind) ? slot(rank, round_).inputShift : control(rank).inputShift[round_ % 2];
  }
  // The current round's region of rank's input area (every rank places
  // rounds alike: round_ring.h) and its result area.
  char* input(int rank) const;
  char* result(int rank, uint32_t round) const;
  // A round of copies (allgather, broadcast) of `bytes` puts its input at
  // the same offset from a cache line as `destination`, where it or its
  // readers copy it to, so that the copies run on aligned vectors
  // (round_ring.h): this rank's input so placed, its offset published for
  // the readers before the round's arrival.
  char* shiftedInput(const void* destination, size_t bytes);
  // A peer's input of this round as it placed it, once it has arrived;
  // an offset past the slack is refused, not read.
  Status peerInput(int peer, const char** input) const;
  // A rank's phases in round g. A small collective's only round in which
  // every rank waits for every other's arrival (allreduce, barrier) posts
  // no finished phase, a store its peers would each fetch again. Its only
  // waiter is a peer reusing the parity two rounds on, and this rank's
  // arrival in its next round (2g+3 > 2g+2) meets that wait: this rank
  // posts it on entering that round, having waited for no peer past round
  // g - 1.
  static uint32_t arrived(uint32_t round) { return 2 * round + 1; }
  static uint32_t finished(uint32_t round) { return 2 * round + 2; }

  // Starts round `round_`, which puts inputBytes in every rank's input
  // area (the most any rank puts): places the round's input, waits until
  // every peer is done with the rounds whose slot, input bytes, inline
  // line or result area it reuses, then publishes the descriptor.
  Status beginRound(const CollectiveContext& node, Kind kind, int root, uint64_t count, size_t inputBytes);
  void post(uint32_t phase);
  // The round's input is in: its slot says so, then its phase.
  void arrive();
  // Waits until peer's counter reaches phase.
  Status await(int peer, uint32_t phase);
  Status awaitAll(uint32_t phase);
  // Waits until peer's input of this round is in and compares its
  // descriptor with ours.
  Status awaitArrival(int peer);
  Status awaitAllArrivals();
  // A round that runs ahead waits on the peer's slot; a peer that posts
  // this round without it is in another collective.
  Status awaitSlotArrival(int peer);
  // Compares peer's descriptor of this round, published where ours is,
  // with ours; a mismatch names what the peer published for this round
  // in either place.
  Status checkDescriptor(int peer) const;
  Status checkDescriptor(int peer, const Descriptor& theirs) const;  // an inline round's
  Status mismatch(int peer, const Descriptor& theirs) const;
  // Waits until peer's inline round of this round is in (both lines when
  // withTail) and checks its descriptor; a peer that posts this round
  // without it is in another collective.
  Status awaitInline(int peer, bool withTail);
  // What awaitSlotArrival and awaitInline share: polls until inThisRound()
  // says peer's lines hold this round, then waits by its phase (posted
  // after them); a peer that posts the round without them is in another
  // collective (what: the lines, for the message).
  template <typename InThisRound>
  Status awaitRoundLines(int peer, InThisRound inThisRound, const char* what);
  Status slowWait(int peer, uint32_t phase);
  Status stalledPeerStatus(int peer, uint32_t phase) const;
  // Every collective's first step: checks that node is the node's
  // context, and forgets the peers' buffers an earlier call read (an
  // address range of those may be another allocation's now).
  Status enterCall(const CollectiveContext& node);
  // allgather, broadcast and all-to-all read straight from the owners' buffers
  // (an in-place all-to-all also writes into its peers').
  Status allgatherInPlace(CollectiveContext& node, const void* own, const OutputBlocks& out);
  Status broadcastInPlace(CollectiveContext& node, const void* published, void* buf, size_t count, int root);
  Status alltoallInPlace(CollectiveContext& node, const void* send, void* recv, size_t blockCount);
  Status allreduceInPlace(CollectiveContext& node, const void* send, void* recv, size_t count);
  Status reduceScatterInPlace(CollectiveContext& node, const InputBlocks& in, void* out);
  // Where every rank's buffers are mapped (shm_mapped.cc).
  Status allgatherMapped(CollectiveContext& node, const void* own, const OutputBlocks& out);
  Status allreduceMapped(CollectiveContext& node, const void* send, void* recv, size_t count);
  // allreduceInPlace's reads with the rounds' results (see the definition).
  Status allreduceReadingInputs(CollectiveContext& node, const void* send, void* recv, size_t count);
  // What the single-copy reductions share (see the definitions).
  Status combineFromPeers(CollectiveContext& node, size_t from, const char* own, char* dst, size_t bytes,
                          bool streaming);
  Status awaitPeersDone(CollectiveContext& node, Kind kind, uint64_t count);
  // The round allgatherInPlace and alltoallInPlace run (see the definition).
  template <typename Stage, typename CopyOwn, typename ReadFrom>
  Status singleCopyRound(const CollectiveContext& node, Kind kind, uint64_t count, const void* published,
                         bool publishedIsOutput, size_t inputBytes, Stage stage, CopyOwn copyOwn,
                         ReadFrom readFrom);
  // An in-place all-to-all's swap of a pair's blocks goes through a bounce
  // buffer of at most this size (alltoallInPlace).
  static constexpr size_t kSwapPieceBytes = size_t{64} << 10;
  // A single-copy allreduce reads each peer's input through a bounce
  // buffer of this size (allreduceInPlace): 2 ranks, busbw at 2-8 MiB
  // 6.9-7.3 GB/s with 256 KiB against 5.0-6.5 with 1 MiB, 64 KiB lower
  // still (a read's system call a piece).
  static constexpr size_t kReducePieceBytes = size_t{256} << 10;
  // Outside the window, from kMappedFromBytes of `bytes` (the window's
  // measure), with single copies enabled: a round in which every rank
  // says whether its buffers that peers read are mapped (mine) and all
  // learn whether every rank's are. Every rank calls it for the same
  // calls, so all take the same path after it; elsewhere it answers
  // false without a round.
  Status mappedEverywhere(const CollectiveContext& node, size_t bytes, bool mine, bool* every);
  // Whether mappedEverywhere runs its round for a call of `bytes`: callers
  // look their buffers up (under the allocations' lock) only then.
  bool asksWhetherMapped(size_t bytes) const { return mappedCopies_ && bytes >= kMappedFromBytes; }
  // Whether [p, p + bytes) lies in one fwHostMemAlloc allocation.
  static bool mapped(const void* p, size_t bytes);
  // Publishes p as this round's userBuffer (userResult) of parity, with
  // the fwHostMemAlloc allocation it lies in, if any.
  void publishBuffer(uint32_t parity, const void* p);
  static void publish(std::atomic<uint64_t>& address, PublishedAllocation& where, const void* p);
  void publishResult(uint32_t parity, const void* p);
  // peer's userBuffer (userResult) of parity, once it has arrived; the
  // allocation it lies in, mapped here, serves peers_'s copies from now
  // on (until the next publication of that buffer is read).
  uint64_t peerBuffer(int peer, uint32_t parity);
  uint64_t peerResult(int peer, uint32_t parity);
  void adoptAllocation(int peer, int which, const PublishedAllocation& published);
  // Whether results bound for a buffer of outputBytes bypass the cache:
  // once the node's ranks' outputs together outgrow the last-level cache,
  // the stores would only evict the segment and read lines that are about
  // to be replaced.
  bool streams(size_t outputBytes) const {
    return outputBytes * static_cast<size_t>(ranks_) >= streamingNodeBytes_;
  }
  // All-to-all blocks from this size go as messages where ranks outnumber
  // the CPUs (see alltoall's definition).
  static constexpr size_t kAlltoallMessagesFromBytes = size_t{256} << 10;
  // allreduce (root < 0) or reduce, in rounds or, when small, in one.
  Status reduceInRounds(CollectiveContext& node, const void* send, void* recv, size_t count, int root);
  // A round's results, slices of elements [first, first + slices.count),
  // each from its reducer's result area into recv once posted.
  Status copyResultsOut(const CollectiveContext& node, void* recv, size_t first, const ChunkLayout& slices,
                        bool streaming);
  // allreduce (root < 0) or reduce of a buffer that fits one round.
  Status reduceEverywhere(CollectiveContext& node, const void* send, void* recv, size_t count, int root);
  // The same for one of at most kInlineBytes, in the inline rounds.
  Status reduceInline(CollectiveContext& node, const void* send, void* recv, size_t count, int root);
  // Reduces count elements at byte offset `at` of every rank's input into
  // dst; own (when set) is this rank's slice, read where it lies in the
  // caller's buffer instead of from its input area (which then need not
  // hold it). own may be dst only when this rank is 0 or 1: the first
  // combine reads both before anything is written.
  void reduceSlices(const CollectiveContext& node, char* dst, size_t at, size_t count,
                    const char* own = nullptr) const;

  ShmSegment segment_;
  int localRank_;
  std::vector<int> nodeRanks_;
  int ranks_;
  size_t chunkBytes_;
  size_t inputBytes_;
  size_t resultBytes_;
  size_t slotBytes_;
  Messenger& messenger_;
  int64_t timeoutMs_;
  bool yieldWhenIdle_;
  size_t streamingNodeBytes_;
  uint32_t round_ = 0;  // the next round, the same on every local rank
  RoundRing inputRing_;
  SingleCopyWindows singleCopy_;
  bool mappedCopies_ = false;  // single copies are enabled: mapped buffers may be read in place
  PeerMemory peers_;  // the local ranks' memory, by local rank
  Descriptor current_{};
  // The highest phase seen of each peer: a wait already satisfied costs
  // no read of the peer's line.
  std::vector<uint32_t> seen_;
  // An in-place single-copy all-to-all's peers whose blocks landed in the
  // staging area (alltoallInPlace), by local rank.
  std::vector<uint8_t> landedFrom_;
  // Where a single-copy reduction reads in each peer's address space
  // (combineFromPeers), by local rank: the peer's buffer, or in a
  // reduce-scatter the block this rank reduces.
  std::vector<uint64_t> peerBlocks_;
  // combineFromPeers' views of those blocks (null: read by the kernel's copy).
  std::vector<const char*> views_;
  // allreduceMapped's peers' outputs, by local rank.
  std::vector<uint64_t> landedResults_;
};

}  // namespace fairway
