#include "bootstrap/root.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"

namespace fairway {
namespace {

// A new connection must say hello within this long; until it has, it holds
// only its own place in the pending list, never the root.
constexpr int64_t kHelloWaitMs = 2000;
// Connections that have not said hello yet, at most; past it the oldest is
// dropped to make room (a rank says hello as soon as it connects, so the
// oldest is the one least likely to be a rank).
constexpr size_t kMaxPendingConnections = 256;
// Connections accepted per wake-up, so that a flood of them cannot keep the
// root from reading the hellos already waiting.
constexpr int kAcceptsPerWakeup = 64;
// Dropped connections logged one by one; the rest are counted.
constexpr int kDropsLoggedOneByOne = 16;

// Constant-time, so a stray peer learns nothing from response timing.
bool secretsEqual(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < kSecretBytes; ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

std::string rankList(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

// A connection that has not said hello yet.
struct Newcomer {
  Socket socket;
  FrameReader reader{kHelloBytes};
  Deadline helloBy;
};

// An admitted rank's connection.
struct RankConnection {
  Socket socket;
  FrameReader reader{kMaxContributionBytes};
  bool contributed = false;
  bool done = false;  // said goodbye
  std::vector<uint8_t> contribution;
};

// Reads what a connection has sent into its reader; *complete once a whole
// frame is there. Errors are the peer's: malformed bytes or a closed socket.
Status readArrived(const Socket& socket, FrameReader* reader, bool* complete) {
  for (;;) {
    size_t got = 0;
    FW_RETURN_IF_ERROR(socket.readSome(reader->next(), reader->wanted(), &got));
    FW_RETURN_IF_ERROR(reader->advance(got));
    *complete = reader->complete();
    if (*complete || got == 0) return Status::ok();
  }
}

// The root thread: one poll loop over the listener, the newcomers and the
// admitted ranks, so no number of silent or slow connections delays a rank
// that speaks the protocol.
class BootstrapRoot {
 public:
  BootstrapRoot(Socket listener, const uint8_t secret[kSecretBytes], int64_t timeoutMs)
      : listener_(std::move(listener)), timeoutMs_(timeoutMs), stopFd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    std::memcpy(secret_, secret, kSecretBytes);
  }
  ~BootstrapRoot() {
    if (stopFd_ >= 0) close(stopFd_);
  }

  // From any thread: the root ends at its next wake-up.
  void stop() {
    const uint64_t one = 1;
    if (stopFd_ >= 0) (void)!write(stopFd_, &one, sizeof(one));
  }

  void run() {
    Status st = serve();
    reportDropsNotLogged();
    if (st.code() == fwSuccess) return;
    if (stopped_ && admitted_ == 0) {
      FW_LOG(Info, Bootstrap, "bootstrap root released before any rank joined");
    } else {
      FW_LOG(Warn, Bootstrap, "bootstrap root giving up: %s", st.message().c_str());
      broadcastError(st.message());
    }
  }

 private:
  bool allAdmitted() const { return nranks_ > 0 && admitted_ == nranks_; }

  Status serve() {
    // Until every rank has joined, the job has timeoutMs from the start;
    // then timeoutMs for each allgather round.
    Deadline deadline = deadlineAfterMs(timeoutMs_);
    std::vector<pollfd> fds;
    while (nranks_ == 0 || doneCount_ < nranks_) {
      Deadline wakeBy = deadline;
      if (!newcomers_.empty()) wakeBy = std::min(wakeBy, newcomers_.front().helloBy);
      fds.clear();
      fds.push_back(pollfd{stopFd_, POLLIN, 0});
      if (listener_.valid()) fds.push_back(pollfd{listener_.fd(), POLLIN, 0});
      for (RankConnection& r : ranks_) {
        fds.push_back(pollfd{r.done || r.contributed ? -1 : r.socket.fd(), POLLIN, 0});
      }
      for (Newcomer& n : newcomers_) fds.push_back(pollfd{n.socket.fd(), POLLIN, 0});
      int rc = ::poll(fds.data(), fds.size(), msUntil(wakeBy));
      if (rc < 0 && errno != EINTR) return Status(fwSystemError, std::string("poll: ") + std::strerror(errno));
      if (rc < 0) continue;

      size_t next = 0;
      if (fds[next++].revents != 0) {
        stopped_ = true;
        return Status(fwInvalidUsage, "the process that made this unique id released it (fwReleaseUniqueId)");
      }
      bool listenerReady = listener_.valid() && fds[next++].revents != 0;
      bool roundDone = false;
      for (RankConnection& r : ranks_) {
        if (fds[next++].revents != 0) FW_RETURN_IF_ERROR(serviceRank(&r));
      }
      FW_RETURN_IF_ERROR(serviceNewcomers(fds, next));
      dropLateNewcomers();
      if (listenerReady) FW_RETURN_IF_ERROR(acceptNewcomers());

      if (allAdmitted()) {
        if (listener_.valid()) {
          // The job is complete: later connections are strays.
          listener_.close();
          newcomers_.clear();
          reportDropsNotLogged();
          deadline = deadlineAfterMs(timeoutMs_);
        }
        FW_RETURN_IF_ERROR(finishRoundIfComplete(&roundDone));
        if (roundDone) deadline = deadlineAfterMs(timeoutMs_);
      }
      if (!roundDone && Clock::now() >= deadline && (nranks_ == 0 || doneCount_ < nranks_)) return timedOut();
    }
    return Status::ok();
  }

  Status timedOut() const {
    const std::string limit = std::to_string(timeoutMs_) + " ms";
    if (nranks_ == 0) return Status(fwTimeout, "no rank joined within " + limit);
    std::vector<int> late;
    if (!allAdmitted()) {
      for (int r = 0; r < nranks_; ++r) if (!ranks_[r].socket.valid() && !ranks_[r].done) late.push_back(r);
      return Status(fwTimeout, "rank(s) " + rankList(late) + " never joined within " + limit);
    }
    for (int r = 0; r < nranks_; ++r) if (!ranks_[r].done && !ranks_[r].contributed) late.push_back(r);
    return Status(fwTimeout, "rank(s) " + rankList(late) + " sent nothing to the bootstrap for " + limit);
  }

  // A frame from an admitted rank: its contribution to the current round,
  // or its goodbye.
  Status serviceRank(RankConnection* r) {
    const int rank = static_cast<int>(r - ranks_.data());
    bool complete = false;
    Status st = readArrived(r->socket, &r->reader, &complete);
    if (!st.isOk()) {
      r->socket.close();
      return Status(fwRemoteError, "rank " + std::to_string(rank) + " left the bootstrap: " + st.message());
    }
    if (!complete) return Status::ok();
    Frame frame = r->reader.take();
    if (frame.type == FrameType::Bye) {
      r->socket.close();
      r->done = true;
      ++doneCount_;
    } else if (frame.type == FrameType::Contribute) {
      r->contribution = std::move(frame.payload);
      r->contributed = true;
    } else {
      return Status(fwAuthError, "rank " + std::to_string(rank) + " sent an unexpected bootstrap frame");
    }
    return Status::ok();
  }

  Status serviceNewcomers(const std::vector<pollfd>& fds, size_t next) {
    for (auto it = newcomers_.begin(); it != newcomers_.end(); ++next) {
      if (fds[next].revents == 0) { ++it; continue; }
      bool complete = false;
      Status st = readArrived(it->socket, &it->reader, &complete);
      if (!st.isOk()) {
        noteDrop("bootstrap root dropped a connection that sent no valid hello: " + st.message());
        it = newcomers_.erase(it);
        continue;
      }
      if (!complete) { ++it; continue; }
      Frame frame = it->reader.take();
      Socket socket = std::move(it->socket);
      it = newcomers_.erase(it);
      FW_RETURN_IF_ERROR(admitOrReject(std::move(socket), frame));
    }
    return Status::ok();
  }

  Status admitOrReject(Socket peer, const Frame& frame) {
    Hello hello{};
    if (frame.type != FrameType::Hello || !decodeHello(frame.payload, &hello)) {
      noteDrop("bootstrap root dropped a connection that sent no valid hello");
      return Status::ok();
    }
    if (!secretsEqual(hello.secret, secret_)) {
      noteDrop("bootstrap root dropped a connection with a wrong job secret (claimed rank " +
               std::to_string(hello.rank) + ")");
      reject(peer, "wrong job secret: this connection belongs to another job");
      return Status::ok();
    }
    if (nranks_ == 0) {
      if (hello.nranks == 0 || hello.nranks > (1u << 20)) {
        reject(peer, "nranks " + std::to_string(hello.nranks) + " out of range");
        return Status::ok();
      }
      nranks_ = static_cast<int>(hello.nranks);
      ranks_.resize(nranks_);
    }
    bool taken = hello.rank < ranks_.size() && (ranks_[hello.rank].socket.valid() || ranks_[hello.rank].done);
    if (static_cast<int>(hello.nranks) != nranks_ || hello.rank >= hello.nranks || taken) {
      FW_LOG(Warn, Bootstrap, "bootstrap root dropped rank %u of %u: job has %d ranks%s", hello.rank, hello.nranks,
             nranks_, taken ? ", rank taken" : "");
      reject(peer, "rank " + std::to_string(hello.rank) + " of " + std::to_string(hello.nranks) +
                       " does not fit a job of " + std::to_string(nranks_) + " ranks, or is taken");
      return Status::ok();
    }
    // The rank sends nothing more until admitted, so a rejected peer always
    // reads its reason instead of a reset connection.
    if (!sendFrame(peer, FrameType::Welcome, nullptr, 0, deadlineAfterMs(1000)).isOk()) {
      FW_LOG(Warn, Bootstrap, "bootstrap root: rank %u left before it was admitted", hello.rank);
      return Status::ok();
    }
    ranks_[hello.rank].socket = std::move(peer);
    ++admitted_;
    return Status::ok();
  }

  // Tells a refused peer why, if its socket takes the few bytes at once:
  // an unauthenticated peer never makes the root wait.
  void reject(const Socket& peer, const std::string& why) {
    (void)sendFrame(peer, FrameType::Error, why.data(), why.size(), Clock::now());
  }

  void dropLateNewcomers() {
    Deadline now = Clock::now();
    while (!newcomers_.empty() && newcomers_.front().helloBy <= now) {
      noteDrop("bootstrap root dropped a connection that said nothing for " + std::to_string(kHelloWaitMs) + " ms");
      newcomers_.pop_front();
    }
  }

  Status acceptNewcomers() {
    for (int i = 0; i < kAcceptsPerWakeup; ++i) {
      Socket peer;
      FW_RETURN_IF_ERROR(listener_.tryAccept(&peer));
      if (!peer.valid()) break;
      if (newcomers_.size() >= kMaxPendingConnections) {
        noteDrop("bootstrap root dropped the oldest of " + std::to_string(kMaxPendingConnections) +
                 " connections waiting to say hello, to make room");
        newcomers_.pop_front();
      }
      newcomers_.push_back(Newcomer{std::move(peer), FrameReader(kHelloBytes), deadlineAfterMs(kHelloWaitMs)});
    }
    return Status::ok();
  }

  // Once every rank that has not left has contributed, answers them all.
  Status finishRoundIfComplete(bool* roundDone) {
    int contributed = 0;
    for (const RankConnection& r : ranks_) contributed += r.contributed;
    if (contributed == 0 || contributed + doneCount_ < nranks_) return Status::ok();
    if (doneCount_ > 0) {
      return Status(fwRemoteError, "some ranks left the bootstrap while others still needed an allgather");
    }
    std::vector<std::vector<uint8_t>> contributions(nranks_);
    for (int r = 0; r < nranks_; ++r) contributions[r] = std::move(ranks_[r].contribution);
    std::vector<uint8_t> payload = encodeGathered(contributions);
    Deadline deadline = deadlineAfterMs(timeoutMs_);
    for (int r = 0; r < nranks_; ++r) {
      Status st = sendFrame(ranks_[r].socket, FrameType::Gathered, payload.data(), payload.size(), deadline);
      if (!st.isOk()) return Status(fwRemoteError, "rank " + std::to_string(r) + ": " + st.message());
      ranks_[r].contributed = false;
    }
    *roundDone = true;
    return Status::ok();
  }

  // Highest rank first: the root runs in rank 0's process (the one that
  // made the id, or rank 0 under a launcher), which may exit as soon as it
  // reads its error, taking this thread with it; by then every other rank's
  // error is written.
  void broadcastError(const std::string& why) {
    for (auto r = ranks_.rbegin(); r != ranks_.rend(); ++r) {
      if (r->socket.valid()) {
        (void)sendFrame(r->socket, FrameType::Error, why.data(), why.size(), deadlineAfterMs(500));
      }
    }
  }

  void noteDrop(const std::string& what) {
    if (++drops_ <= kDropsLoggedOneByOne) FW_LOG(Warn, Bootstrap, "%s", what.c_str());
  }

  void reportDropsNotLogged() {
    if (drops_ > kDropsLoggedOneByOne) {
      FW_LOG(Warn, Bootstrap, "bootstrap root dropped %d more connections (wrong secret, malformed or silent)",
             drops_ - kDropsLoggedOneByOne);
    }
    drops_ = std::min(drops_, kDropsLoggedOneByOne);
  }

  Socket listener_;
  uint8_t secret_[kSecretBytes];
  int64_t timeoutMs_;
  int nranks_ = 0;
  int admitted_ = 0;
  int doneCount_ = 0;
  int drops_ = 0;
  std::vector<RankConnection> ranks_;
  std::list<Newcomer> newcomers_;  // oldest first
  int stopFd_;                     // an eventfd: readable once stop() is called
  bool stopped_ = false;
};

// The roots this process runs, by the id ranks reach them with, so
// fwReleaseUniqueId can stop one. Entries of roots that have ended are
// pruned whenever a root starts.
std::mutex rootsMutex;
std::map<std::string, std::weak_ptr<BootstrapRoot>> startedRoots;

std::string keyOf(const BootstrapId& id) {
  return id.root.toString() + "/" + std::string(reinterpret_cast<const char*>(id.secret), kSecretBytes);
}

}  // namespace

Status startBootstrapRoot(const SocketAddress& listenAddress, const uint8_t secret[kSecretBytes],
                          int64_t timeoutMs, BootstrapId* id) {
  Socket listener;
  FW_RETURN_IF_ERROR(Socket::listenOn(listenAddress, &listener, &id->root));
  std::memcpy(id->secret, secret, kSecretBytes);
  FW_LOG(Info, Bootstrap, "bootstrap root listening on %s", id->root.toString().c_str());
  auto root = std::make_shared<BootstrapRoot>(std::move(listener), secret, timeoutMs);
  {
    std::lock_guard<std::mutex> lock(rootsMutex);
    for (auto it = startedRoots.begin(); it != startedRoots.end();) {
      it = it->second.expired() ? startedRoots.erase(it) : std::next(it);
    }
    startedRoots[keyOf(*id)] = root;
  }
  std::thread([root] { root->run(); }).detach();
  return Status::ok();
}

Status stopBootstrapRoot(const BootstrapId& id) {
  std::shared_ptr<BootstrapRoot> root;
  {
    std::lock_guard<std::mutex> lock(rootsMutex);
    auto it = startedRoots.find(keyOf(id));
    if (it == startedRoots.end()) {
      return Status(fwInvalidUsage, "the unique id's bootstrap root (" + id.root.toString() +
                                        ") is not running in this process: it was made by another, or has ended");
    }
    root = it->second.lock();
    startedRoots.erase(it);
  }
  if (root) root->stop();
  return Status::ok();
}

}  // namespace fairway
