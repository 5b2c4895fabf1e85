#include "p2p/messenger.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/log.h"
#include "p2p/idle_poll.h"
#include "p2p/tags.h"

namespace fairway {
namespace {
// Empty polls between clock reads: reading the clock on every poll cost a
// tenth of a small allreduce's time.
constexpr unsigned kPollsPerClockRead = 32;

}  // namespace

Messenger::Messenger(TransportRoutes routes, int rank, std::vector<PeerInfo> peers, const Config& config,
                     bool yieldWhenIdle)
    : routes_(std::move(routes)), rank_(rank), peers_(std::move(peers)), config_(config),
      yieldWhenIdle_(yieldWhenIdle),
      waitPolicy_(config.waitPolicy == "spin" ? WaitMode::Spin : WaitMode::Adaptive, config.spinMicros,
                  yieldWhenIdle),
      incomingNotices_(routes_.transports.size()) {}

Messenger::~Messenger() {
  disconnect();
  if (wakeFd_ >= 0) ::close(wakeFd_);
}

Status Messenger::start() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < incomingNotices_.size(); ++i) FW_RETURN_IF_ERROR(postNoticeReceive(i));
  }
  wakeFd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeFd_ < 0) return Status(fwSystemError, std::string("eventfd: ") + std::strerror(errno));
  idleProgress_ = std::thread([this] { idleProgressLoop(); });
  return Status::ok();
}

// Watched requests are polled after each round; with some pending, the
// thread also wakes every few milliseconds, as a completion need not come
// with a transport event (one a waiting caller's progress finished).
void Messenger::idleProgressLoop() {
  constexpr int kIdlePollMs = 100;
  constexpr int kWatchPollMs = 5;
  while (!stopping_.load(std::memory_order_acquire)) {
    if (waiters_.load(std::memory_order_acquire) > 0 || broken_.load(std::memory_order_acquire)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kWatchPollMs));
      watches_.pollAll();
      continue;
    }
    pollfd fds[3];
    nfds_t watched = 0;
    bool pending = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& transport : routes_.transports) {
        bool armed = false;
        const int fd = transport->eventFd();
        if (!transport->armEvents(&armed).isOk() || !armed || fd < 0) {
          pending = true;  // work is waiting (or no fd to sleep on): progress now
          break;
        }
        fds[watched++] = pollfd{fd, POLLIN, 0};
      }
      if (pending) progressAll();
    }
    // A peer's failure notice, read while this rank calls nothing: its
    // next call then fails with the peer's cause, where it could have
    // completed alone on what its peers left (the node's segment). Looked
    // for only when a transport had something (a notice is a message), so
    // an idle rank's periodic wake-ups cost nothing more.
    if (pending) {
      (void)checkAbortNotice();
      watches_.pollAll();
      std::this_thread::yield();
      continue;
    }
    const nfds_t transportFds = watched;
    fds[watched++] = pollfd{wakeFd_, POLLIN, 0};
    bool transportSignalled = false;
    if (::poll(fds, watched, watches_.empty() ? kIdlePollMs : kWatchPollMs) > 0) {
      for (nfds_t i = 0; i < transportFds; ++i) transportSignalled = transportSignalled || fds[i].revents != 0;
      uint64_t woken = 0;
      (void)!::read(wakeFd_, &woken, sizeof(woken));  // a new watch, or stopping
    }
    if (stopping_.load(std::memory_order_acquire)) break;
    if (waiters_.load(std::memory_order_acquire) > 0) continue;  // the waiter progresses for itself
    {
      std::lock_guard<std::mutex> lock(mutex_);
      progressAll();
    }
    watches_.pollAll();
    if (transportSignalled) (void)checkAbortNotice();
  }
}

void Messenger::watch(std::shared_ptr<ProgressWatch> watch) {
  watches_.add(std::move(watch));
  const uint64_t one = 1;
  if (wakeFd_ >= 0) (void)!::write(wakeFd_, &one, sizeof(one));
}

void Messenger::stopIdleProgress() {
  if (!idleProgress_.joinable()) return;
  stopping_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  (void)!::write(wakeFd_, &one, sizeof(one));
  idleProgress_.join();
}

void Messenger::progressAll() {
  for (auto& transport : routes_.transports) transport->progress();
}

// Called without mutex_ held: a failed post breaks the communicator, and
// fail() takes mutex_ to send the peers its notice.
Status Messenger::postChecked(Status posted, Pending* out) {
  if (!posted.isOk()) {
    fail(posted);
    return posted;
  }
  out->done = false;
  return Status::ok();
}

Status Messenger::send(int peer, const void* buf, size_t bytes, uint64_t tag, Pending* out, MemoryType memory) {
  if (broken_.load(std::memory_order_acquire)) return brokenStatus();
  *out = Pending{kCompleted, tag, transportOf(peer), peer, false, true};
  Status posted;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    posted = out->via->isend(peer, buf, bytes, tag, memory, &out->handle);
  }
  return postChecked(posted, out);
}

Status Messenger::recv(int peer, void* buf, size_t bytes, uint64_t tag, Pending* out, MemoryType memory) {
  if (broken_.load(std::memory_order_acquire)) return brokenStatus();
  *out = Pending{kCompleted, tag, transportOf(peer), peer, true, true};
  Status posted;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    posted = out->via->irecv(peer, buf, bytes, tag, Tag::kFullMask, memory, &out->handle);
  }
  return postChecked(posted, out);
}

Status Messenger::test(Pending* p, bool* done) {
  if (p->done) { *done = true; return Status::ok(); }
  Status st;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    progressAll();
    st = p->via->test(p->handle, done);
  }
  if (*done) p->done = true;
  if (!st.isOk()) {
    Status why = (st.code() == fwTransportError && p->peer >= 0)
                     ? peerFailed(p->peer, Status(fwRemoteError, "rank " + std::to_string(p->peer) + ": " + st.message()))
                     : st;
    fail(why);
    return why;
  }
  if (!*done) {
    Status notice = checkAbortNotice();
    if (!notice.isOk()) return notice;
  }
  return Status::ok();
}

template <typename Poll, typename Diagnose, typename TimedOut, typename Abandon>
Status Messenger::waitLoop(Poll&& poll, Diagnose&& diagnose, TimedOut&& timedOut, Abandon&& abandon) {
  waiters_.fetch_add(1, std::memory_order_acq_rel);
  struct Leave {
    std::atomic<int>& waiters;
    ~Leave() { waiters.fetch_sub(1, std::memory_order_acq_rel); }
  } leave{waiters_};

  // The clock is read only every kPollsPerClockRead empty polls; idleSince
  // is the first such reading after the last completion.
  Clock::time_point idleSince{};
  Clock::time_point lastHealthCheck{};
  unsigned emptyPolls = 0;
  SpinningWait spin(waitPolicy_);
  for (;;) {
    bool progressed = false;
    bool finished = false;
    Status failure = poll(&progressed, &finished);
    if (failure.isOk() && finished) return Status::ok();
    // Peers' failure notices are read by diagnose once the wait idles; a
    // failure another thread saw shows here at once.
    if (failure.isOk() && broken_.load(std::memory_order_acquire)) failure = brokenStatus();  // another thread failed
    if (!failure.isOk()) {
      abandon();
      fail(failure);
      return brokenStatus();
    }

    if (progressed) {
      idleSince = Clock::time_point{};
      emptyPolls = 0;
      spin.restart();
      continue;
    }
    if (++emptyPolls % kPollsPerClockRead != 0) {
      spin.idle();
      continue;
    }
    Clock::time_point now = Clock::now();
    if (idleSince == Clock::time_point{}) idleSince = lastHealthCheck = now;
    if (spin.keepSpinning(now)) continue;
    if (now - lastHealthCheck >= std::chrono::milliseconds(kHealthCheckIntervalMs)) {
      lastHealthCheck = now;
      failure = diagnose();
      if (failure.isOk() && now - idleSince >= std::chrono::milliseconds(config_.timeoutMs)) failure = timedOut();
      if (!failure.isOk()) {
        abandon();
        fail(failure);
        return brokenStatus();
      }
    }
    blockOnEvents(kHealthCheckIntervalMs);
  }
}

Status Messenger::waitAll(Pending* list, size_t count) {
  size_t remaining = 0;
  for (size_t i = 0; i < count; ++i) remaining += list[i].done ? 0 : 1;
  if (remaining == 0) return Status::ok();
  auto poll = [&](bool* progressed, bool* finished) {
    Status failure;
    std::lock_guard<std::mutex> lock(mutex_);
    progressAll();
    for (size_t i = 0; i < count && failure.isOk(); ++i) {
      if (list[i].done) continue;
      bool done = false;
      Status st = list[i].via->test(list[i].handle, &done);
      if (done) {
        list[i].done = true;
        --remaining;
        *progressed = true;
      }
      if (!st.isOk()) {
        failure = (st.code() == fwTransportError && list[i].peer >= 0)
                      ? peerFailed(list[i].peer,
                                   Status(fwRemoteError, "rank " + std::to_string(list[i].peer) + ": " + st.message()))
                      : st;
      }
    }
    *finished = remaining == 0;
    return failure;
  };
  WaitNoteScope waitNote(*this);
  auto diagnose = [&] {
    for (size_t i = 0; i < count; ++i) {
      if (list[i].done) continue;
      waitNote.note(list[i].peer);
      break;
    }
    return diagnoseStall(list, count);
  };
  return waitLoop(poll, diagnose, [&] { return timeoutStatus(list, count); }, [&] { cancel(list, count); });
}

Messenger::WaitNote Messenger::waitNote() const {
  WaitNote note;
  note.peer = waitingOn_.load(std::memory_order_acquire);
  note.sinceNs = waitingSinceNs_.load(std::memory_order_relaxed);
  return note;
}

void Messenger::noteWaitingOn(int peer) {
  if (waitingOn_.load(std::memory_order_relaxed) == peer) return;
  timespec now{};
  clock_gettime(CLOCK_REALTIME_COARSE, &now);
  waitingSinceNs_.store(static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec),
                        std::memory_order_relaxed);
  waitingOn_.store(peer, std::memory_order_release);
}

void Messenger::clearWaitNote() { waitingOn_.store(-1, std::memory_order_release); }

Status Messenger::waitUntil(const std::function<Status(bool* finished)>& poll,
                            const std::function<Status()>& timedOut) {
  // Nothing short of poll's success counts as progress: the timeout runs
  // from the start of the wait.
  auto progressThenPoll = [&](bool*, bool* finished) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      progressAll();
    }
    return poll(finished);
  };
  return waitLoop(progressThenPoll, [&] { return checkHealth(); }, timedOut, [] {});
}

bool Messenger::arrived(int peer, uint64_t tag) {
  uint64_t found = 0;
  std::lock_guard<std::mutex> lock(mutex_);
  return transportOf(peer)->probe(tag, Tag::kFullMask, &found);
}

void Messenger::blockOnEvents(int timeoutMs) {
  pollfd fds[2];
  nfds_t watched = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& transport : routes_.transports) {
      bool armed = false;
      if (!transport->armEvents(&armed).isOk() || !armed) return;  // work is already pending
      int fd = transport->eventFd();
      if (fd < 0 || watched == 2) {
        sched_yield();
        return;
      }
      fds[watched++] = pollfd{fd, POLLIN, 0};
    }
  }
  (void)::poll(fds, watched, timeoutMs);
}

void Messenger::cancel(Pending* list, size_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < count; ++i) {
    if (list[i].done) continue;
    list[i].via->cancel(list[i].handle);
    list[i].done = true;
  }
}

Status Messenger::diagnoseStall(const Pending* list, size_t count) {
  FW_RETURN_IF_ERROR(checkHealth());
  return findMismatchedPeer(list, count);
}

Status Messenger::checkHealth() {
  FW_RETURN_IF_ERROR(checkAbortNotice());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& transport : routes_.transports) {
      int lost = transport->firstFailedPeer();
      if (lost >= 0) return peerFailed(lost, Status(fwRemoteError, "lost the connection to rank " + std::to_string(lost)));
    }
  }
  return findDeadLocalPeer();
}

void Messenger::progressIfIdle() {
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (lock.owns_lock()) progressAll();
}

bool Messenger::localPeerExited(int rank) const {
  return rank != rank_ && peers_[rank_].sharesProcessSpaceWith(peers_[rank]) && processHasExited(peers_[rank].pid);
}

Status Messenger::findDeadLocalPeer() {
  for (int r = 0; r < size(); ++r) {
    if (localPeerExited(r)) {
      return peerFailed(r, Status(fwRemoteError, "rank " + std::to_string(r) + " (pid " +
                                                     std::to_string(peers_[r].pid) + " on " + peers_[r].host +
                                                     ") exited"));
    }
  }
  return Status::ok();
}

Status Messenger::findMismatchedPeer(const Pending* list, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const Pending& p = list[i];
    if (p.done || !p.isRecv || Tag::channel(p.tag) != TagChannel::Collective) continue;
    uint64_t found = 0;
    bool any;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      any = p.via->probe(p.tag, Tag::kChannelMask | Tag::kSourceMask, &found);
    }
    if (!any) continue;
    if (Tag::sequence(found) != Tag::sequence(p.tag) || Tag::signature(found) != Tag::signature(p.tag)) {
      return Status(fwCollectiveMismatch,
                    "rank " + std::to_string(p.peer) + " called collective #" + std::to_string(Tag::sequence(found)) +
                        " (signature " + std::to_string(Tag::signature(found)) + ") while rank " +
                        std::to_string(rank_) + " waits in collective #" + std::to_string(Tag::sequence(p.tag)) +
                        " (signature " + std::to_string(Tag::signature(p.tag)) +
                        "): the ranks called different collectives, or with different type, op, root or count");
    }
  }
  return Status::ok();
}

Status Messenger::timeoutStatus(const Pending* list, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (list[i].done) continue;
    return peerFailed(list[i].peer, Status(fwTimeout, "rank " + std::to_string(list[i].peer) + " did not " +
                                 (list[i].isRecv ? "send" : "receive") + " within FAIRWAY_TIMEOUT_MS=" +
                                 std::to_string(config_.timeoutMs) +
                                 " ms: it is stuck, dead, or not calling this collective"));
  }
  return Status(fwTimeout, "timed out");
}

Status Messenger::brokenStatus() const {
  // Every call asks: a healthy communicator answers without the lock
  // (broken_ is set after the status, under it).
  if (!broken_.load(std::memory_order_acquire)) return Status::ok();
  std::lock_guard<std::mutex> lock(brokenMutex_);
  return brokenStatus_;
}

void Messenger::fail(const Status& why, bool notifyPeers) {
  {
    std::lock_guard<std::mutex> lock(brokenMutex_);
    if (broken_.load()) return;
    brokenStatus_ = why;
    broken_.store(true, std::memory_order_release);
  }
  FW_LOG(Warn, Coll, "rank %d: communicator failed: %s", rank_, why.message().c_str());
  if (notifyPeers) sendNoticeToAll(fwRemoteError, "rank " + std::to_string(rank_) + " reports: " + why.message());
}

Status Messenger::peerFailed(int rank, Status why) {
  if (rank >= 0 && rank < size() && rank != rank_) {
    std::lock_guard<std::mutex> lock(brokenMutex_);
    failedRanks_.insert(rank);
  }
  return why;
}

void Messenger::disconnect() {
  stopIdleProgress();
  const Status broken = brokenStatus();
  watches_.abandonAll(broken.isOk() ? Status(fwInvalidUsage, "the communicator was destroyed before it completed")
                                    : broken);
  std::lock_guard<std::mutex> lock(mutex_);
  for (NoticeSlot& slot : incomingNotices_) {
    if (slot.recv.done) continue;
    slot.recv.via->cancel(slot.recv.handle);
    slot.recv.done = true;
  }
  for (auto& transport : routes_.transports) transport->disconnect(broken_.load());
}

}  // namespace fairway
