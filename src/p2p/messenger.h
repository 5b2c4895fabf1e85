// The communicator's thread-safe front over its transport. Every wait here
// is bounded: it ends when the operations complete, when a failure is
// diagnosed (a peer's abort notice, a lost connection, a local peer process
// that exited, ranks in different collectives), or after FAIRWAY_TIMEOUT_MS
// without progress. The first failure breaks the communicator for good and
// is sent to every peer, so all survivors report the same cause.
#pragma once

#include <atomic>
#include <set>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/config.h"
#include "p2p/failure_notice.h"
#include "p2p/message_port.h"
#include "p2p/peer_info.h"
#include "p2p/progress_watches.h"
#include "p2p/wait_policy.h"
#include "transports/transport.h"

namespace fairway {

// The transports of one communicator and which of them reaches each peer:
// one for peers on this node, and one more, network-only, for the peers on
// other nodes when there are any.
struct TransportRoutes {
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<int> transportOfPeer;  // index into transports, per rank
};

class Messenger final : public MessagePort {
 public:
  // yieldWhenIdle: this host runs more ranks than it has CPUs, so an idle
  // poll gives the core away instead of keeping it.
  Messenger(TransportRoutes routes, int rank, std::vector<PeerInfo> peers, const Config& config,
            bool yieldWhenIdle);
  ~Messenger();

  // Posts the receives for peers' abort notices and starts the idle
  // progress thread; call once after connect.
  Status start();

  // memory: where buf's bytes are (device buffers must say so: the
  // transport is told, not left to guess).
  Status send(int peer, const void* buf, size_t bytes, uint64_t tag, Pending* out,
              MemoryType memory = MemoryType::Host) override;
  Status recv(int peer, void* buf, size_t bytes, uint64_t tag, Pending* out,
              MemoryType memory = MemoryType::Host) override;
  // Waits for every operation in list. On failure the rest are cancelled.
  Status waitAll(Pending* list, size_t count) override;
  Status wait(Pending* p) { return waitAll(p, 1); }
  // Progresses the transports until poll sets *finished; bounded as
  // waitAll is (a failed peer, or FAIRWAY_TIMEOUT_MS, when the error is
  // timedOut's). poll runs without the transports' lock held.
  Status waitUntil(const std::function<Status(bool* finished)>& poll, const std::function<Status()>& timedOut);
  // Whether a message with exactly this tag from peer has arrived and no
  // receive has claimed it.
  bool arrived(int peer, uint64_t tag);
  // One round of progress, then whether p completed.
  Status test(Pending* p, bool* done);
  void cancel(Pending* list, size_t count);

  // For waits outside the transports (the node's shared memory): a peer's
  // failure notice, a lost connection or a local peer process that exited,
  // as an error naming the rank; ok while none is seen.
  Status checkHealth();
  // One round of progress on every transport, unless another thread is
  // inside them: posted messages keep moving while a caller waits elsewhere.
  void progressIfIdle();
  // Polls watch on the progress thread after its rounds of progress (every
  // few milliseconds while a caller waits in here or once the communicator
  // is broken) until it is done; abandoned when the messenger disconnects.
  void watch(std::shared_ptr<ProgressWatch> watch);

  // The failure that broke the communicator (ok while healthy).
  Status brokenStatus() const;
  // Breaks the communicator with why (the first failure wins) and, unless
  // the failure is a peer's own notice, tells every peer.
  void fail(const Status& why, bool notifyPeers = true);
  // Revokes it (fwRevoked from now on, overriding an earlier failure) and
  // tells every peer, once: a rank that learns of it from a notice relays
  // it too, so it reaches every live rank even if its first sender dies.
  void revoke(const Status& why);
  bool revoked() const { return revoked_.load(std::memory_order_acquire); }
  // The ranks known to have failed: seen here or named in peers' notices.
  std::vector<int> failedRanks() const;
  // Records rank as failed (fwCommGetFailedRanks) and returns why: for
  // every wait that finds a peer dead or silent, here or in a provider.
  Status peerFailed(int rank, Status why);

  // Messages that work on a broken or revoked communicator, over the
  // connections it still has, for survivors that recover (fwCommShrink):
  // `mine` (`bytes` long) goes to every rank of `peers`, and one message of
  // `bytes` comes from each, under exchange `id` (the same on every rank,
  // new for each exchange). Within timeoutMs, a peer that has sent nothing
  // (a process that exited, a lost connection, or silence) is put in
  // *silent and counted as failed; the others' messages are in *got.
  Status recoveryExchange(const std::vector<int>& peers, uint64_t id, const std::vector<uint8_t>& mine,
                          std::vector<std::vector<uint8_t>>* got, std::vector<int>* silent);
  // Closes connections; forced after a failure or abort.
  void disconnect();

  // What a wait that idled past a health check waits on, for the live
  // status query (fairway-trace --status): the rank (-1: none) and since
  // when (real time, ns). Only waits that already sleep write it.
  struct WaitNote {
    int peer = -1;
    uint64_t sinceNs = 0;
  };
  WaitNote waitNote() const;
  void noteWaitingOn(int peer);
  void clearWaitNote();
  // Notes a wait's peer once it idles, and clears the note when the wait ends.
  class WaitNoteScope {
   public:
    explicit WaitNoteScope(Messenger& messenger) : messenger_(messenger) {}
    ~WaitNoteScope() {
      if (noted_) messenger_.clearWaitNote();
    }
    void note(int peer) {
      messenger_.noteWaitingOn(peer);
      noted_ = true;
    }
    WaitNoteScope(const WaitNoteScope&) = delete;
    WaitNoteScope& operator=(const WaitNoteScope&) = delete;

   private:
    Messenger& messenger_;
    bool noted_ = false;
  };

  int rank() const override { return rank_; }
  int64_t timeoutMs() const { return config_.timeoutMs; }
  int size() const override { return static_cast<int>(peers_.size()); }
  // Whether idle waits give the core away (more ranks than CPUs here).
  bool yieldsWhenIdle() const { return yieldWhenIdle_; }
  // How this communicator's waits spin and block (its own, and the
  // node's shared-memory provider's).
  WaitPolicy& waitPolicy() { return waitPolicy_; }
  const std::vector<PeerInfo>& peers() const { return peers_; }

 private:
  static constexpr size_t kNoticeBytes = FailureNotice::kBytes;

  Status postChecked(Status posted, Pending* out);
  // The bounded wait behind waitAll and waitUntil: poll(&progressed,
  // &finished) until finished; once idle, asks diagnose() for a cause every
  // health-check interval and timedOut() after FAIRWAY_TIMEOUT_MS. On
  // failure it calls abandon() (to cancel what is posted) and breaks the
  // communicator. A template (used in messenger.cc only), so a collective's
  // waits wrap nothing on the heap.
  template <typename Poll, typename Diagnose, typename TimedOut, typename Abandon>
  Status waitLoop(Poll&& poll, Diagnose&& diagnose, TimedOut&& timedOut, Abandon&& abandon);
  // Why the operations in list make no progress, or ok if no cause is seen.
  Status diagnoseStall(const Pending* list, size_t count);
  Status checkAbortNotice();
  Status findDeadLocalPeer();
  Status findMismatchedPeer(const Pending* list, size_t count);
  Status timeoutStatus(const Pending* list, size_t count);
  // The failure notice (failure_notice.h) to every peer, flushed briefly.
  void sendNoticeToAll(fwResult_t code, const std::string& text);
  Status postNoticeReceive(size_t slot);
  bool localPeerExited(int rank) const;
  void blockOnEvents(int timeoutMs);
  // While no caller waits here, progresses the transports whenever they
  // signal: a rank that has moved on (to computation, or to another
  // library's collective) must still answer its peers' protocol messages,
  // such as UCX's rendezvous acknowledgements, or a peer waiting for its
  // send to complete waits with it (seen as a hang between a Fairway and a
  // gloo group in one job). A waiting caller progresses for itself, so the
  // thread stands aside then.
  void idleProgressLoop();
  void stopIdleProgress();
  Transport* transportOf(int peer) const { return routes_.transports[routes_.transportOfPeer[peer]].get(); }
  void progressAll();

  TransportRoutes routes_;
  int rank_;
  std::vector<PeerInfo> peers_;
  Config config_;
  bool yieldWhenIdle_;
  WaitPolicy waitPolicy_;
  std::mutex mutex_;  // serialises every call into the transports
  std::atomic<int> waiters_{0};  // callers inside waitAll
  std::atomic<bool> stopping_{false};
  int wakeFd_ = -1;  // an eventfd that cuts the idle thread's poll short
  std::thread idleProgress_;
  ProgressWatches watches_;

  std::atomic<int> waitingOn_{-1};
  std::atomic<uint64_t> waitingSinceNs_{0};

  std::atomic<bool> broken_{false};
  std::atomic<bool> revoked_{false};
  mutable std::mutex brokenMutex_;
  Status brokenStatus_;
  std::set<int> failedRanks_;  // under brokenMutex_

  // One notice receive per transport: a notice arrives over whichever
  // transport reaches its sender.
  struct NoticeSlot {
    Pending recv;
    char text[kNoticeBytes] = {};
  };
  std::vector<NoticeSlot> incomingNotices_;
  char outgoingNotice_[kNoticeBytes] = {};
};

}  // namespace fairway
