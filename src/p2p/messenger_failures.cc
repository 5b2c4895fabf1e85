// A communicator's end and what survives it: the failure notices a rank
// sends its peers when the communicator breaks or is revoked, the ranks
// known to have failed, and the messages survivors exchange to recover
// (fwCommShrink) over the connections they still have.
#include <chrono>
#include <cstring>
#include <thread>

#include "core/log.h"
#include "p2p/messenger.h"
#include "p2p/tags.h"

namespace fairway {
namespace {
// How long a failing rank spends telling its peers.
constexpr int kNoticeFlushMs = 200;
}  // namespace

Status Messenger::checkAbortNotice() {
  bool arrived = false;
  Status st;
  char text[kNoticeBytes] = {};
  {
    // Several threads may wait at once (a send/recv and a queued collective).
    std::lock_guard<std::mutex> lock(mutex_);
    for (NoticeSlot& slot : incomingNotices_) {
      if (slot.recv.done) continue;
      st = slot.recv.via->test(slot.recv.handle, &arrived);
      if (arrived) {
        slot.recv.done = true;
        std::memcpy(text, slot.text, kNoticeBytes - 1);
        break;
      }
    }
  }
  if (!arrived) return Status::ok();
  FailureNotice notice;
  const bool wellFormed = st.isOk() && FailureNotice::decode(text, &notice);
  {
    std::lock_guard<std::mutex> lock(brokenMutex_);
    failedRanks_.insert(notice.failed.begin(), notice.failed.end());
  }
  // A later notice (a revocation after a failure) must arrive too.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < incomingNotices_.size(); ++i) {
      if (incomingNotices_[i].recv.done) (void)postNoticeReceive(i);
    }
  }
  if (!wellFormed) {
    fail(Status(fwRemoteError, "a peer sent a malformed failure notice" + (st.isOk() ? "" : ": " + st.message())),
         /*notifyPeers=*/false);
  } else if (notice.code == fwRevoked) {
    revoke(Status(fwRevoked, notice.text));  // relayed once by every rank that hears it
  } else {
    fail(Status(fwRemoteError, notice.text), /*notifyPeers=*/false);  // the sender already told everyone
  }
  return brokenStatus();
}

Status Messenger::postNoticeReceive(size_t slot) {
  Pending& recv = incomingNotices_[slot].recv;
  recv = Pending{};
  recv.isRecv = true;
  recv.via = routes_.transports[slot].get();
  FW_RETURN_IF_ERROR(recv.via->irecv(-1, incomingNotices_[slot].text, kNoticeBytes,
                                     Tag::channelBits(TagChannel::Control), Tag::kChannelMask, MemoryType::Host,
                                     &recv.handle));
  recv.done = false;
  return Status::ok();
}

// Sent to every peer, the failed ones too; flushed for kNoticeFlushMs at
// most (a dead peer's send may never complete), then abandoned.
void Messenger::sendNoticeToAll(fwResult_t code, const std::string& text) {
  if (peers_.size() < 2) return;
  FailureNotice notice;
  notice.code = code;
  notice.text = text;
  {
    std::lock_guard<std::mutex> lock(brokenMutex_);
    notice.failed = failedRanks_;
  }
  std::vector<Pending> notices;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    notice.encode(outgoingNotice_);
    for (int r = 0; r < size(); ++r) {
      // Failed ranks too: one that only timed out may be alive and call
      // later, and must not complete alone; a dead one's send is
      // abandoned with the others' after the flush below.
      if (r == rank_) continue;
      Pending p{kCompleted, 0, transportOf(r), r, false, false};
      if (p.via->isend(r, outgoingNotice_, kNoticeBytes, Tag::control(rank_), MemoryType::Host, &p.handle).isOk()) {
        notices.push_back(p);
      }
    }
  }
  Deadline deadline = deadlineAfterMs(kNoticeFlushMs);
  for (;;) {
    bool all = true;
    std::lock_guard<std::mutex> lock(mutex_);
    progressAll();
    for (Pending& p : notices) {
      if (p.done) continue;
      bool done = false;
      (void)p.via->test(p.handle, &done);
      p.done = done;
      all = all && done;
    }
    if (all) break;
    if (Clock::now() >= deadline) {
      for (Pending& p : notices) if (!p.done) { p.via->cancel(p.handle); p.done = true; }
      break;
    }
  }
}

void Messenger::revoke(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(brokenMutex_);
    if (revoked_.load()) return;
    brokenStatus_ = why;  // overrides an earlier failure: later calls say revoked
    revoked_.store(true, std::memory_order_release);
    broken_.store(true, std::memory_order_release);
  }
  FW_LOG(Warn, Coll, "rank %d: communicator revoked: %s", rank_, why.message().c_str());
  sendNoticeToAll(fwRevoked, why.message());
}

std::vector<int> Messenger::failedRanks() const {
  std::lock_guard<std::mutex> lock(brokenMutex_);
  return std::vector<int>(failedRanks_.begin(), failedRanks_.end());
}

Status Messenger::recoveryExchange(const std::vector<int>& peers, uint64_t id, const std::vector<uint8_t>& mine,
                                   std::vector<std::vector<uint8_t>>* got, std::vector<int>* silent) {
  const size_t n = peers.size();
  got->assign(n, std::vector<uint8_t>(mine.size()));
  silent->clear();
  std::vector<Pending> recvs(n), sends(n);
  std::vector<bool> over(n, false);  // received, or given up
  auto giveUp = [&](size_t i) {
    if (!recvs[i].done) recvs[i].via->cancel(recvs[i].handle);
    if (!sends[i].done) sends[i].via->cancel(sends[i].handle);
    recvs[i].done = sends[i].done = over[i] = true;
    silent->push_back(peers[i]);
    (void)peerFailed(peers[i], Status::ok());
  };
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < n; ++i) {
      const int p = peers[i];
      recvs[i] = Pending{kCompleted, Tag::recovery(p, id), transportOf(p), p, true, false};
      sends[i] = Pending{kCompleted, Tag::recovery(rank_, id), transportOf(p), p, false, false};
      const bool posted =
          recvs[i].via->irecv(p, (*got)[i].data(), mine.size(), recvs[i].tag, Tag::kFullMask, MemoryType::Host,
                              &recvs[i].handle).isOk() &&
          sends[i].via->isend(p, mine.data(), mine.size(), sends[i].tag, MemoryType::Host, &sends[i].handle).isOk();
      if (!posted) giveUp(i);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.timeoutMs);
  for (;;) {
    size_t open = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      progressAll();
      for (size_t i = 0; i < n; ++i) {
        if (over[i]) continue;
        for (Pending* p : {&recvs[i], &sends[i]}) {
          if (p->done) continue;
          bool done = false;
          if (!p->via->test(p->handle, &done).isOk()) {
            p->done = true;  // failed: released by the transport
            giveUp(i);
            break;
          }
          p->done = done;
        }
        if (over[i]) continue;
        if (recvs[i].done && sends[i].done) {
          over[i] = true;
        } else {
          ++open;
        }
      }
      for (size_t i = 0; i < n && open > 0; ++i) {
        if (!over[i] && localPeerExited(peers[i])) {
          giveUp(i);
          --open;
        }
      }
    }
    if (open == 0) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t i = 0; i < n; ++i) if (!over[i]) giveUp(i);
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return Status::ok();
}

}  // namespace fairway
