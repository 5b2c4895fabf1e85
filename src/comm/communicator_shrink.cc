// fwCommShrink: the survivors of a broken (or healthy) communicator agree
// on the ranks to leave out and make a new communicator of the others.
// Everything travels over the connections the survivors still have
// (Messenger::recoveryExchange), so no step needs the bootstrap root, rank
// 0, or any one rank to be alive.
//
// The agreement runs in rounds. Each survivor sends every rank it still
// counts alive its set of excluded ranks (the list its caller asked for,
// the ranks it knows failed, and what it learned in earlier rounds), the
// caller's list itself, and whether the round before showed every set
// equal to its own ("stable"). A rank silent for a round (exited, lost, or
// quiet past FAIRWAY_TIMEOUT_MS) joins the set. A rank decides once a
// round brings no change and every sender was stable: every survivor has
// then held the same set for two rounds. A rank that dies during the last
// rounds can still leave two survivors with different sets; the new
// communicator's record exchange carries each member's view of the
// membership and fails on every member when they differ, and the
// survivors call fwCommShrink again.
#include <algorithm>
#include <cstring>
#include <set>
#include <string>

#include "comm/communicator.h"
#include "core/log.h"

namespace fairway {
namespace {

std::string listOf(const std::set<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return "{" + out + "}";
}

std::vector<uint8_t> bitmapOf(const std::set<int>& ranks, int n) {
  std::vector<uint8_t> bits((n + 7) / 8, 0);
  for (int r : ranks) bits[r / 8] |= static_cast<uint8_t>(1u << (r % 8));
  return bits;
}

std::set<int> setOf(const uint8_t* bits, int n) {
  std::set<int> out;
  for (int r = 0; r < n; ++r) if (bits[r / 8] & (1u << (r % 8))) out.insert(r);
  return out;
}

// An exchange's id: the attempt (every survivor's count of its calls on
// this communicator), what is exchanged, and its round or step.
uint64_t exchangeId(uint32_t attempt, int what, uint32_t step) {
  return (static_cast<uint64_t>(attempt & 0xffff) << 24) | (static_cast<uint64_t>(what & 0xf) << 20) |
         (step & 0xfffff);
}
constexpr int kAgreementRound = 1;
constexpr int kRecordLengths = 2;
constexpr int kRecords = 3;

}  // namespace

Status Communicator::agreeOnExcluded(uint32_t attempt, const std::set<int>& requested, std::set<int>* excluded) {
  const int n = size(), me = rank();
  std::set<int> mine(requested.begin(), requested.end());
  for (int r : messenger_->failedRanks()) mine.insert(r);
  const size_t bitmapBytes = static_cast<size_t>(n + 7) / 8;
  const std::vector<uint8_t> requestedBits = bitmapOf(requested, n);
  bool stableBefore = false;
  // Each round either decides, grows the set (n times at most), or flips a rank to stable.
  for (uint32_t round = 0; round < static_cast<uint32_t>(2 * n + 4); ++round) {
    std::vector<uint8_t> message(1 + 2 * bitmapBytes);
    message[0] = stableBefore ? 1 : 0;
    const std::vector<uint8_t> excludedBits = bitmapOf(mine, n);
    std::memcpy(message.data() + 1, excludedBits.data(), bitmapBytes);
    std::memcpy(message.data() + 1 + bitmapBytes, requestedBits.data(), bitmapBytes);
    std::vector<int> alive;
    for (int r = 0; r < n; ++r) if (r != me && !mine.count(r)) alive.push_back(r);
    std::vector<std::vector<uint8_t>> got;
    std::vector<int> silent;
    FW_RETURN_IF_ERROR(
        messenger_->recoveryExchange(alive, exchangeId(attempt, kAgreementRound, round), message, &got, &silent));
    const std::set<int> before = mine;
    bool changed = !silent.empty();
    bool allStable = stableBefore;
    mine.insert(silent.begin(), silent.end());
    std::string disagreement;
    std::set<int> excludedMe;
    for (size_t i = 0; i < alive.size(); ++i) {
      if (std::find(silent.begin(), silent.end(), alive[i]) != silent.end()) continue;
      const std::vector<uint8_t>& theirs = got[i];
      const std::set<int> theirExcluded = setOf(theirs.data() + 1, n);
      const std::set<int> theirRequested = setOf(theirs.data() + 1 + bitmapBytes, n);
      if (theirRequested != requested) {
        disagreement += " rank " + std::to_string(alive[i]) + " asked to exclude " + listOf(theirRequested) + ";";
      }
      if (theirExcluded.count(me)) excludedMe.insert(alive[i]);
      if (theirExcluded != before) changed = true;
      mine.insert(theirExcluded.begin(), theirExcluded.end());
      allStable = allStable && theirs[0] == 1;
    }
    if (!disagreement.empty()) {
      return Status(fwInvalidUsage, "the survivors passed different lists to exclude: rank " + std::to_string(me) +
                                        " asked to exclude " + listOf(requested) + ";" + disagreement);
    }
    mine.erase(me);
    if (!excludedMe.empty()) {
      return Status(fwRemoteError, "rank(s) " + listOf(excludedMe) + " left rank " + std::to_string(me) +
                                       " out of the shrunk communicator (they found it failed or silent)");
    }
    if (!changed && allStable) {
      *excluded = mine;
      return Status::ok();
    }
    stableBefore = !changed;
  }
  return Status(fwInternalError, "the survivors did not agree within " + std::to_string(2 * n + 4) + " rounds");
}

Status Communicator::shrink(const std::vector<int>& exclude, int flags, std::unique_ptr<Communicator>* out) {
  out->reset();
  const uint32_t attempt = shrinkAttempts_++;
  if (flags & FAIRWAY_SHRINK_ABORT) {
    messenger_->revoke(Status(fwRevoked, "rank " + std::to_string(rank()) + " revoked the communicator to shrink it"));
    if (device_) device_->abortNcclExcept(device_->nativeCanShrink(), device_->nodePhaseCanShrink());
  }
  executor_.drain();  // what is queued ends: done, or failed fast on a broken communicator

  const std::set<int> requested(exclude.begin(), exclude.end());
  std::set<int> excluded;
  FW_RETURN_IF_ERROR(agreeOnExcluded(attempt, requested, &excluded).withContext("agreeing on the ranks to exclude"));
  std::vector<int> members;
  for (int r = 0; r < size(); ++r) if (!excluded.count(r)) members.push_back(r);
  const int newRank = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
  FW_LOG(Info, Coll, "rank %d: shrinking to %zu ranks without %s", rank(), members.size(), listOf(excluded).c_str());

  // Records among the members, each exchange preceded by one of lengths
  // that also carries the sender's view of the membership.
  std::vector<int> others;
  for (int r : members) if (r != rank()) others.push_back(r);
  const std::vector<uint8_t> membership = bitmapOf(std::set<int>(members.begin(), members.end()), size());
  uint32_t step = 0;
  OobAllgather oob = [&](const std::vector<uint8_t>& record, std::vector<std::vector<uint8_t>>* all) -> Status {
    std::vector<uint8_t> header(8 + membership.size());
    const uint64_t length = record.size();
    std::memcpy(header.data(), &length, 8);
    std::memcpy(header.data() + 8, membership.data(), membership.size());
    std::vector<std::vector<uint8_t>> got;
    std::vector<int> silent;
    FW_RETURN_IF_ERROR(messenger_->recoveryExchange(others, exchangeId(attempt, kRecordLengths, step), header, &got,
                                                    &silent));
    if (!silent.empty()) {
      return Status(fwRemoteError, "rank " + std::to_string(silent.front()) +
                                       " failed while the shrunk communicator formed: call fwCommShrink again");
    }
    uint64_t longest = length;
    std::vector<uint64_t> lengths(others.size());
    for (size_t i = 0; i < others.size(); ++i) {
      if (std::memcmp(got[i].data() + 8, membership.data(), membership.size()) != 0) {
        return Status(fwRemoteError, "rank " + std::to_string(others[i]) +
                                         " agreed on other members (a rank failed during the agreement): call "
                                         "fwCommShrink again");
      }
      std::memcpy(&lengths[i], got[i].data(), 8);
      longest = std::max(longest, lengths[i]);
    }
    if (longest > (1u << 24)) return Status(fwInternalError, "a record of " + std::to_string(longest) + " bytes");
    std::vector<uint8_t> padded(record);
    padded.resize(longest);
    FW_RETURN_IF_ERROR(messenger_->recoveryExchange(others, exchangeId(attempt, kRecords, step), padded, &got,
                                                    &silent));
    ++step;
    if (!silent.empty()) {
      return Status(fwRemoteError, "rank " + std::to_string(silent.front()) +
                                       " failed while the shrunk communicator formed: call fwCommShrink again");
    }
    all->assign(members.size(), {});
    for (size_t i = 0, k = 0; i < members.size(); ++i) {
      if (members[i] == rank()) {
        (*all)[i] = record;
      } else {
        got[k].resize(lengths[k]);
        (*all)[i] = std::move(got[k++]);
      }
    }
    return Status::ok();
  };
  FW_RETURN_IF_ERROR(Communicator::create(oob, newRank, static_cast<int>(members.size()), config_, out)
                         .withContext("forming the shrunk communicator"));
  nameTraceOfChild(out->get(), "shrink", members);
  // In-flight NCCL work with a failed rank never ends: abort it then.
  const bool abortInFlight = (flags & FAIRWAY_SHRINK_ABORT) || !messenger_->failedRanks().empty();
  Status st = shrinkNativeInto(excluded, abortInFlight, out->get());
  if (!st.isOk()) out->reset();
  return st.withContext("shrinking the NCCL communicator");
}

Status Communicator::shrinkNativeInto(const std::set<int>& excluded, bool abortInFlight, Communicator* shrunk) {
  // ncclCommShrink is collective: every member shrinks, or none does. The
  // members decide together, over the shrunk communicator: [0] the whole
  // communicator's NCCL communicator, [1] the nodes'.
  const bool devices = device_ && shrunk->device_;
  int32_t mine[2] = {devices && device_->nativeCanShrink() ? 1 : 0, devices && device_->nodePhaseCanShrink() ? 1 : 0};
  int32_t all[2] = {0, 0};
  FW_RETURN_IF_ERROR(shrunk->collective(makeArgs(CollectiveKind::AllReduce, mine, all, 2, fwInt32, fwMin)));
  // One kept for a shrink that is not to be is aborted now, as the abort
  // asked; the shrunk communicator makes its own.
  if (abortInFlight && devices) device_->abortNcclExcept(all[0] == 1, all[1] == 1);
  if (all[0] == 1) {
    std::unique_ptr<NativeCollectives> native;
    FW_RETURN_IF_ERROR(
        device_->shrinkNative(std::vector<int>(excluded.begin(), excluded.end()), abortInFlight, &native));
    shrunk->device_->adoptNative(std::move(native));
    FW_LOG(Info, Coll, "rank %d: NCCL communicator shrunk to %d ranks (ncclCommShrink)", shrunk->rank(),
           shrunk->size());
  }
  if (all[1] == 1) {
    // This node's survivors shrink its NCCL communicator, without the node's excluded ranks (node-local numbering).
    const int node = layout_.nodeOf(rank());
    std::vector<int> localExcluded;
    for (int r : excluded) if (layout_.nodeOf(r) == node) localExcluded.push_back(layout_.localRankOf(r));
    std::unique_ptr<NativeCollectives> native;
    FW_RETURN_IF_ERROR(device_->shrinkNodePhase(localExcluded, abortInFlight, &native));
    shrunk->device_->adoptNodePhase(std::move(native));
    FW_LOG(Info, Coll, "rank %d: node NCCL communicator shrunk to %d ranks (ncclCommShrink)", shrunk->rank(),
           shrunk->layout().localSizeOf(shrunk->rank()));
  }
  return Status::ok();
}

}  // namespace fairway
