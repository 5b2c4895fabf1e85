#include "providers/shm/shm_node.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstring>

#include "algorithms/context.h"
#include "core/config.h"
#include "core/copy_kernels.h"
#include "p2p/idle_poll.h"
#include "providers/shm/shm_copy.h"

namespace fairway {
namespace {

constexpr uint64_t kMagic = 0x3830304d48535746ull;  // "FWSHM008": the layout of this version
constexpr size_t kAlign = 4096;

std::vector<pid_t> pidsOf(const Messenger& messenger, const std::vector<int>& nodeRanks) {
  std::vector<pid_t> pids;
  for (int rank : nodeRanks) pids.push_back(messenger.peers()[rank].pid);
  return pids;
}
// A futex sleep is cut this short to look at the peers' health.
constexpr int kSleepSliceMs = 10;
// Empty polls between looks at the clock and at the transports (a
// two-phase algorithm's rail messages): both cost more than a poll, and
// most waits here end within a few polls.
constexpr unsigned kPollsPerClockRead = 256;

size_t roundUp(size_t value, size_t to) { return (value + to - 1) / to * to; }

// Whether counter has reached target (both wrap around).
bool reached(uint32_t counter, uint32_t target) { return static_cast<int32_t>(counter - target) >= 0; }

void futexWait(std::atomic<uint32_t>* word, uint32_t seen, int timeoutMs) {
  timespec timeout{timeoutMs / 1000, (timeoutMs % 1000) * 1000000L};
  (void)syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &timeout, nullptr, 0);
}

void futexWakeAll(std::atomic<uint32_t>* word) {
  (void)syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Only a node of two ranks walks the input ring, from the size measured
// best for this CPU (round_ring.h): every rank of a node computes the same.
bool walksRing(int ranks) { return ranks == 2; }
size_t inputBytesFor(int ranks, size_t chunkBytes) {
  return RoundRing::areaBytes(chunkBytes, RoundRing::walkFromBytesHere());
}
size_t resultBytesFor(int ranks, size_t chunkBytes) { return roundUp(chunkBytes / ranks + 64, 64); }
size_t slotBytesFor(int ranks, size_t chunkBytes) {
  return roundUp(inputBytesFor(ranks, chunkBytes) + 2 * resultBytesFor(ranks, chunkBytes), kAlign);
}
size_t controlBytesFor(int ranks, size_t headerBytes, size_t controlBytes) {
  return roundUp(headerBytes + static_cast<size_t>(ranks) * controlBytes, kAlign);
}

}  // namespace

size_t SharedMemoryNode::segmentBytes(int ranks, size_t chunkBytes) {
  return controlBytesFor(ranks, sizeof(Header), sizeof(Control)) +
         static_cast<size_t>(ranks) * slotBytesFor(ranks, chunkBytes);
}

SharedMemoryNode::SharedMemoryNode(ShmSegment segment, int localRank, std::vector<int> nodeRanks, size_t chunkBytes,
                                   Messenger& messenger, const Config& config, bool yieldWhenIdle)
    : segment_(std::move(segment)), localRank_(localRank), nodeRanks_(std::move(nodeRanks)),
      ranks_(static_cast<int>(nodeRanks_.size())), chunkBytes_(chunkBytes),
      inputBytes_(inputBytesFor(ranks_, chunkBytes)), resultBytes_(resultBytesFor(ranks_, chunkBytes)),
      slotBytes_(slotBytesFor(ranks_, chunkBytes)),
      messenger_(messenger), timeoutMs_(config.timeoutMs), yieldWhenIdle_(yieldWhenIdle),
      streamingNodeBytes_(config.shmStreamBytes != 0 ? config.shmStreamBytes : defaultStreamingNodeBytes()),
      inputRing_(chunkBytes, walksRing(ranks_), RoundRing::walkFromBytesHere()),
      peers_(pidsOf(messenger, nodeRanks_), nodeRanks_), seen_(ranks_, 0), landedFrom_(ranks_, 0),
      peerBlocks_(ranks_, 0), views_(ranks_, nullptr) {}

void SharedMemoryNode::format() {
  // posix_fallocate left the segment zeroed: every counter starts at 0.
  Header* header = reinterpret_cast<Header*>(segment_.data());
  header->magic = kMagic;
  header->ranks = static_cast<uint64_t>(ranks_);
  header->chunkBytes = chunkBytes_;
  // An inline line of parity p only ever holds rounds of parity p: one of
  // the other parity reads as "not this round" (a zero would be round 0).
  // Likewise a round slot s only holds rounds g with g % kRoundSlots == s.
  for (int rank = 0; rank < ranks_; ++rank) {
    for (uint32_t parity = 0; parity < 2; ++parity) {
      control(rank).inlineRound[parity].round.store(parity ^ 1, std::memory_order_relaxed);
      control(rank).inlineRound[parity].tailRound.store(parity ^ 1, std::memory_order_relaxed);
    }
    for (uint32_t s = 0; s < kRoundSlots; ++s) control(rank).slots[s].arrived.store(s + 1, std::memory_order_relaxed);
  }
}

Status SharedMemoryNode::checkFormat() const {
  const Header* header = reinterpret_cast<const Header*>(segment_.data());
  if (header->magic != kMagic) return Status(fwInternalError, "the node's segment is not a Fairway segment of this version");
  if (header->ranks != static_cast<uint64_t>(ranks_) || header->chunkBytes != chunkBytes_) {
    return Status(fwInvalidUsage, "the node's leader made its segment for " + std::to_string(header->ranks) +
                                      " ranks and chunks of " + std::to_string(header->chunkBytes) +
                                      " bytes, this rank expects " + std::to_string(ranks_) + " and " +
                                      std::to_string(chunkBytes_) +
                                      ": set FAIRWAY_SHM_CHUNK_BYTES alike on every rank");
  }
  return Status::ok();
}

SharedMemoryNode::Control& SharedMemoryNode::control(int rank) const {
  char* first = segment_.data() + sizeof(Header);
  return *reinterpret_cast<Control*>(first + static_cast<size_t>(rank) * sizeof(Control));
}

char* SharedMemoryNode::input(int rank) const {
  char* slot = segment_.data() + controlBytesFor(ranks_, sizeof(Header), sizeof(Control)) +
               static_cast<size_t>(rank) * slotBytes_;
  return slot + inputRing_.at();
}

char* SharedMemoryNode::shiftedInput(const void* destination, size_t bytes) {
  // Smaller copies run in two passes whatever the alignment, and an
  // unaligned segment only adds their heads and tails (2-rank allgather of
  // 4 KiB pieces 0.59 against 0.63 us).
  const size_t shift =
      bytes >= kernels::kOnePassFromBytes ? reinterpret_cast<uintptr_t>(destination) % RoundRing::kSlackBytes : 0;
  publishedShift(localRank_).store(static_cast<uint8_t>(shift), std::memory_order_relaxed);
  return input(localRank_) + shift;
}

Status SharedMemoryNode::peerInput(int peer, const char** at) const {
  // Published before the peer's arrival, which this rank has seen.
  const size_t shift = publishedShift(peer).load(std::memory_order_relaxed);
  if (shift >= RoundRing::kSlackBytes) {
    return Status(fwInternalError, "rank " + std::to_string(nodeRanks_[peer]) + " placed its shared-memory round " +
                                       std::to_string(shift) + " bytes into its region, past the " +
                                       std::to_string(RoundRing::kSlackBytes - 1) +
                                       " a round may use: the node's segment was overwritten");
  }
  *at = input(peer) + shift;
  return Status::ok();
}

char* SharedMemoryNode::result(int rank, uint32_t round) const {
  char* slot = segment_.data() + controlBytesFor(ranks_, sizeof(Header), sizeof(Control)) +
               static_cast<size_t>(rank) * slotBytes_;
  return slot + inputBytes_ + (round % 2) * resultBytes_;
}

void SharedMemoryNode::announce(uint32_t sequence, uint8_t signature) {
  Control& mine = control(localRank_);
  mine.announcedSequence.store(sequence, std::memory_order_release);  // after this rank's last phase
  mine.announcedSignature.store(static_cast<uint32_t>(signature) + 1, std::memory_order_release);
}

Status SharedMemoryNode::enterCall(const CollectiveContext& node) {
  if (node.size() != ranks_ || node.rank() != localRank_) {
    return Status(fwInternalError, "the shared-memory provider serves the node's " + std::to_string(ranks_) +
                                       " ranks, not a group of " + std::to_string(node.size()));
  }
  peers_.beginCall();
  return Status::ok();
}

Status SharedMemoryNode::beginRound(const CollectiveContext& node, Kind kind, int root, uint64_t count,
                                    size_t inputBytes) {
  const bool reduces = kind == kAllreduce || kind == kReduceScatter || kind == kReduce || kind == kAllreduceInPlace ||
                       kind == kReduceScatterInPlace || kind == kAllreduceReadingInputs || kind == kAllreduceMapped;
  const bool ahead = runsAhead(kind);
  inputRing_.place(inputBytes, reduces ? RoundRing::kNearSpanBytes : RoundRing::kWholeRing, round_, ahead);
  // What this round writes must have been read by every peer: its slot,
  // last used kRoundSlots rounds back, or its parity's place (and inline
  // line and result area), two rounds back; and the input region's bytes,
  // last used two or more rounds back (never the round before:
  // round_ring.h).
  uint32_t lastReadRound = ahead ? round_ - kRoundSlots : round_ - 2;
  if (inputRing_.reusesBytes() && static_cast<int32_t>(inputRing_.reusedRound() - lastReadRound) > 0) {
    lastReadRound = inputRing_.reusedRound();
  }
  FW_RETURN_IF_ERROR(awaitAll(finished(lastReadRound)));
  const Reducer* reducer = reduces ? &node.reducer() : nullptr;  // the copies' contexts have none
  current_ = Descriptor{round_,
                        node.sequence(),
                        static_cast<uint8_t>(kind),
                        static_cast<uint8_t>(reducer ? reducer->datatype() : 0),
                        static_cast<uint8_t>(reducer ? reducer->op() : 0),
                        0,
                        root,
                        count};
  published(localRank_) = current_;
  return Status::ok();
}

void SharedMemoryNode::post(uint32_t phase) {
  Control& mine = control(localRank_);
  mine.phase.store(phase, std::memory_order_seq_cst);
  if (mine.sleepers.load(std::memory_order_seq_cst) > 0) futexWakeAll(&mine.phase);
}

void SharedMemoryNode::arrive() {
  if (runsAhead(current_.kind)) slot(localRank_, round_).arrived.store(round_, std::memory_order_release);
  post(arrived(round_));
}

Status SharedMemoryNode::awaitAll(uint32_t phase) {
  for (int p = 0; p < ranks_; ++p) {
    if (p != localRank_) FW_RETURN_IF_ERROR(await(p, phase));
  }
  return Status::ok();
}

Status SharedMemoryNode::await(int peer, uint32_t phase) {
  if (reached(seen_[peer], phase)) return Status::ok();
  Control& theirs = control(peer);
  uint32_t now = theirs.phase.load(std::memory_order_acquire);
  if (!reached(now, phase)) {
    FW_RETURN_IF_ERROR(slowWait(peer, phase));
    now = theirs.phase.load(std::memory_order_acquire);
  }
  seen_[peer] = now;
  return Status::ok();
}

Status SharedMemoryNode::awaitAllArrivals() {
  for (int p = 0; p < ranks_; ++p) {
    if (p != localRank_) FW_RETURN_IF_ERROR(awaitArrival(p));
  }
  return Status::ok();
}

Status SharedMemoryNode::awaitArrival(int peer) {
  if (runsAhead(current_.kind)) return awaitSlotArrival(peer);
  FW_RETURN_IF_ERROR(await(peer, arrived(round_)));
  return checkDescriptor(peer);
}

Status SharedMemoryNode::awaitSlotArrival(int peer) {
  const RoundSlot& theirs = slot(peer, round_);
  const uint32_t round = round_;
  // Exactly this round: the slot last held round g - kRoundSlots or, long
  // ago, another of its rounds, which a wrapped comparison could take for
  // a later one.
  FW_RETURN_IF_ERROR(awaitRoundLines(
      peer, [&] { return theirs.arrived.load(std::memory_order_acquire) == round; }, "slot"));
  return checkDescriptor(peer);
}

Status SharedMemoryNode::awaitInline(int peer, bool withTail) {
  const InlineRound& theirs = control(peer).inlineRound[round_ % 2];
  const uint32_t round = round_;
  // Exactly this round: the line last held round g - 2 or, long ago, any
  // other, which a wrapped comparison could take for a later one. Both
  // lines are loaded each time so that their fetches overlap.
  FW_RETURN_IF_ERROR(awaitRoundLines(
      peer,
      [&] {
        const uint32_t head = theirs.round.load(std::memory_order_acquire);
        const uint32_t tail = withTail ? theirs.tailRound.load(std::memory_order_acquire) : round;
        return (head == round) & (tail == round);
      },
      "data"));
  return checkDescriptor(peer, theirs.descriptor);
}

template <typename InThisRound>
Status SharedMemoryNode::awaitRoundLines(int peer, InThisRound inThisRound, const char* what) {
  bool arrivedHere = false;
  for (unsigned polls = 0; polls < kPollsPerClockRead && !(arrivedHere = inThisRound()); ++polls) {
    idlePoll(yieldWhenIdle_);
  }
  if (!arrivedHere) {
    // A longer wait goes by the peer's phase, posted after those lines:
    // the futex sleep, the health checks and the timeout.
    FW_RETURN_IF_ERROR(slowWait(peer, arrived(round_)));
    if (!inThisRound()) {
      FW_RETURN_IF_ERROR(checkDescriptor(peer));
      return Status(fwInternalError, "rank " + std::to_string(nodeRanks_[peer]) +
                                         " posted its shared-memory round without the round's " + what);
    }
  }
  if (!reached(seen_[peer], arrived(round_))) seen_[peer] = arrived(round_);
  return Status::ok();
}

Status SharedMemoryNode::checkDescriptor(int peer) const {
  const Descriptor& theirs = published(peer);
  if (std::memcmp(&theirs, &current_, sizeof(Descriptor)) == 0) return Status::ok();
  // A peer in a round of the other way published this round's there;
  // neither place is rewritten before this rank has finished the round.
  // (A place never written holds zeros: kind 0, round 0.)
  const Descriptor& elsewhere =
      runsAhead(current_.kind) ? control(peer).round[round_ % 2] : slot(peer, round_).descriptor;
  auto ofThisRound = [&](const Descriptor& d) { return d.round == round_ && d.kind != 0; };
  return mismatch(peer, !ofThisRound(theirs) && ofThisRound(elsewhere) ? elsewhere : theirs);
}

Status SharedMemoryNode::checkDescriptor(int peer, const Descriptor& theirs) const {
  if (std::memcmp(&theirs, &current_, sizeof(Descriptor)) == 0) return Status::ok();
  return mismatch(peer, theirs);
}

Status SharedMemoryNode::mismatch(int peer, const Descriptor& theirs) const {
  const Descriptor& ours = current_;
  auto describe = [](const Descriptor& d) {
    // In the order of Kind (shm_node.h).
    static const char* const kKinds[] = {"?",         "allreduce", "reduce-scatter",         "allgather",
                                         "broadcast", "reduce",    "barrier",                "allgather (single copy)",
                                         "broadcast (single copy)", "all-to-all",   "all-to-all (single copy)",
                                         "allreduce (single copy)"};
    const char* kind = d.kind < sizeof(kKinds) / sizeof(kKinds[0]) ? kKinds[d.kind] : "?";
    return "collective #" + std::to_string(d.sequence) + " (shared-memory " + kind +
           ", type " + std::to_string(d.datatype) + ", op " + std::to_string(d.op) + ", root " +
           std::to_string(d.root) + ", count " + std::to_string(d.count) + ", round " + std::to_string(d.round) + ")";
  };
  return Status(fwCollectiveMismatch, "rank " + std::to_string(nodeRanks_[peer]) + " is in " + describe(theirs) +
                                          " while rank " + std::to_string(nodeRanks_[localRank_]) + " is in " +
                                          describe(ours) +
                                          ": the ranks called different collectives, or with different type, op, "
                                          "root or count");
}

// Spins as the communicator's wait policy says (p2p/wait_policy.h), then
// sleeps on the peer's counter in slices, checking between them that the
// communicator is healthy, that the peer is alive and in this collective,
// and the timeout.
Status SharedMemoryNode::slowWait(int peer, uint32_t phase) {
  using Clock = std::chrono::steady_clock;
  Control& theirs = control(peer);
  const Clock::time_point start = Clock::now();
  SpinningWait spin(messenger_.waitPolicy());
  unsigned polls = 0;
  for (;;) {
    if (reached(theirs.phase.load(std::memory_order_acquire), phase)) return Status::ok();
    if (++polls % kPollsPerClockRead != 0) {
      spin.idle();
      continue;
    }
    // Work posted elsewhere (a two-phase algorithm's rail messages) moves on too.
    messenger_.progressIfIdle();
    if (!spin.keepSpinning(Clock::now())) break;
  }
  Clock::time_point lastCheck = Clock::now();
  Messenger::WaitNoteScope waitNote(messenger_);
  for (;;) {
    theirs.sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = theirs.phase.load(std::memory_order_seq_cst);
    if (!reached(seen, phase)) futexWait(&theirs.phase, seen, kSleepSliceMs);
    theirs.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (reached(theirs.phase.load(std::memory_order_acquire), phase)) return Status::ok();
    const Clock::time_point now = Clock::now();
    if (now - lastCheck < std::chrono::milliseconds(kHealthCheckIntervalMs)) continue;
    lastCheck = now;
    waitNote.note(nodeRanks_[peer]);
    FW_RETURN_IF_ERROR(messenger_.brokenStatus());
    FW_RETURN_IF_ERROR(messenger_.checkHealth());
    FW_RETURN_IF_ERROR(stalledPeerStatus(peer, phase));
    if (now - start >= std::chrono::milliseconds(timeoutMs_)) {
      return messenger_.peerFailed(
          nodeRanks_[peer], Status(fwTimeout, "rank " + std::to_string(nodeRanks_[peer]) +
                                                  " did not reach this step of the node's shared-memory collective #" +
                                                  std::to_string(current_.sequence) + " within FAIRWAY_TIMEOUT_MS=" +
                                                  std::to_string(timeoutMs_) +
                                                  " ms: it is stuck, dead, or not calling this collective"));
    }
  }
}

// A peer that has announced another collective than ours (or a later one)
// will never take this step.
Status SharedMemoryNode::stalledPeerStatus(int peer, uint32_t phase) const {
  const Control& theirs = control(peer);
  const uint32_t signature = theirs.announcedSignature.load(std::memory_order_acquire);
  if (signature == 0) return Status::ok();
  const uint32_t sequence = theirs.announcedSequence.load(std::memory_order_acquire);
  // A peer posts its last phase of a collective before it announces the
  // next one: having moved on since our last look, it has taken the step.
  if (reached(theirs.phase.load(std::memory_order_acquire), phase)) return Status::ok();
  const Control& mine = control(localRank_);
  const uint32_t ourSequence = mine.announcedSequence.load(std::memory_order_relaxed);
  const uint32_t ourSignature = mine.announcedSignature.load(std::memory_order_relaxed);
  if (sequence == ourSequence && signature == ourSignature) return Status::ok();
  if (static_cast<int32_t>(sequence - ourSequence) < 0) return Status::ok();  // still on its way here
  return Status(fwCollectiveMismatch,
                "rank " + std::to_string(nodeRanks_[peer]) + " called collective #" + std::to_string(sequence) +
                    " (signature " + std::to_string(signature - 1) + ") while rank " +
                    std::to_string(nodeRanks_[localRank_]) + " waits in collective #" + std::to_string(ourSequence) +
                    " (signature " + std::to_string(ourSignature - 1) +
                    ") in shared memory: the ranks called different collectives, or with different type, op, root "
                    "or count");
}

}  // namespace fairway
