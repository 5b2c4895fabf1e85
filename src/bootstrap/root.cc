#include "bootstrap/root.h"

#include <poll.h>

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "core/log.h"

namespace fairway {
namespace {

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

class BootstrapRoot {
 public:
  BootstrapRoot(Socket listener, const uint8_t secret[kSecretBytes], int64_t timeoutMs)
      : listener_(std::move(listener)), timeoutMs_(timeoutMs) {
    std::memcpy(secret_, secret, kSecretBytes);
  }

  void run() {
    Status st = admitRanks();
    if (st.isOk()) st = serveRounds();
    if (!st.isOk()) {
      FW_LOG(Warn, Bootstrap, "bootstrap root giving up: %s", st.message().c_str());
      broadcastError(st.message());
    }
  }

 private:
  // Accepts connections until every rank of the job has said hello. Peers
  // with a wrong secret, malformed bytes or a duplicate rank are dropped.
  Status admitRanks() {
    Deadline deadline = deadlineAfterMs(timeoutMs_);
    for (;;) {
      Socket peer;
      Status st = listener_.accept(deadline, &peer);
      if (st.code() == fwTimeout) {
        if (nranks_ == 0) return Status(fwTimeout, "no rank joined within " + std::to_string(timeoutMs_) + " ms");
        std::vector<int> missing;
        for (int r = 0; r < nranks_; ++r) if (!ranks_[r].valid()) missing.push_back(r);
        return Status(fwTimeout, "rank(s) " + rankList(missing) + " never joined within " +
                                     std::to_string(timeoutMs_) + " ms");
      }
      FW_RETURN_IF_ERROR(st);
      // A silent connection may hold up admission only briefly.
      Frame frame;
      st = recvFrame(peer, kHelloBytes, std::min(deadline, deadlineAfterMs(2000)), &frame);
      Hello hello{};
      if (!st.isOk() || frame.type != FrameType::Hello || !decodeHello(frame.payload, &hello)) {
        FW_LOG(Warn, Bootstrap, "bootstrap root dropped a connection that sent no valid hello%s%s",
               st.isOk() ? "" : ": ", st.message().c_str());
        continue;
      }
      if (!secretsEqual(hello.secret, secret_)) {
        FW_LOG(Warn, Bootstrap, "bootstrap root dropped a connection with a wrong job secret (claimed rank %u)",
               hello.rank);
        reject(peer, "wrong job secret: this connection belongs to another job", deadline);
        continue;
      }
      if (nranks_ == 0) {
        if (hello.nranks == 0 || hello.nranks > (1u << 20)) {
          reject(peer, "nranks " + std::to_string(hello.nranks) + " out of range", deadline);
          continue;
        }
        nranks_ = static_cast<int>(hello.nranks);
        ranks_.resize(nranks_);
      }
      if (static_cast<int>(hello.nranks) != nranks_ || hello.rank >= hello.nranks || ranks_[hello.rank].valid()) {
        FW_LOG(Warn, Bootstrap, "bootstrap root dropped rank %u of %u: job has %d ranks%s", hello.rank,
               hello.nranks, nranks_, hello.rank < ranks_.size() && ranks_[hello.rank].valid() ? ", rank taken" : "");
        reject(peer, "rank " + std::to_string(hello.rank) + " of " + std::to_string(hello.nranks) +
                         " does not fit a job of " + std::to_string(nranks_) + " ranks, or is taken",
               deadline);
        continue;
      }
      // The rank sends nothing more until admitted, so a rejected peer
      // always reads its reason instead of a reset connection.
      if (!sendFrame(peer, FrameType::Welcome, nullptr, 0, std::min(deadline, deadlineAfterMs(2000))).isOk()) {
        FW_LOG(Warn, Bootstrap, "bootstrap root: rank %u left before it was admitted", hello.rank);
        continue;
      }
      ranks_[hello.rank] = std::move(peer);
      if (++admitted_ == nranks_) return Status::ok();
    }
  }

  void reject(const Socket& peer, const std::string& why, Deadline deadline) {
    (void)sendFrame(peer, FrameType::Error, why.data(), why.size(), std::min(deadline, deadlineAfterMs(500)));
  }

  // Each round: one Contribute from every rank, then the concatenation to all.
  Status serveRounds() {
    std::vector<bool> done(nranks_, false);
    int doneCount = 0;
    std::vector<std::vector<uint8_t>> contributions(nranks_);
    std::vector<bool> contributed(nranks_, false);
    int contributedCount = 0;
    std::vector<pollfd> fds(nranks_);
    Deadline deadline = deadlineAfterMs(timeoutMs_);
    while (doneCount < nranks_) {
      for (int r = 0; r < nranks_; ++r) {
        fds[r] = pollfd{(done[r] || contributed[r]) ? -1 : ranks_[r].fd(), POLLIN, 0};
      }
      int rc = ::poll(fds.data(), fds.size(), msUntil(deadline));
      if (rc < 0 && errno != EINTR) return Status(fwSystemError, std::string("poll: ") + std::strerror(errno));
      if (rc == 0) {
        std::vector<int> late;
        for (int r = 0; r < nranks_; ++r) if (!done[r] && !contributed[r]) late.push_back(r);
        return Status(fwTimeout, "rank(s) " + rankList(late) + " sent nothing to the bootstrap for " +
                                     std::to_string(timeoutMs_) + " ms");
      }
      for (int r = 0; r < nranks_; ++r) {
        if (fds[r].fd < 0 || fds[r].revents == 0) continue;
        Frame frame;
        Status st = recvFrame(ranks_[r], kMaxContributionBytes, deadline, &frame);
        if (!st.isOk()) {
          ranks_[r].close();
          done[r] = true;
          return Status(fwRemoteError, "rank " + std::to_string(r) + " left the bootstrap: " + st.message());
        }
        if (frame.type == FrameType::Bye) {
          ranks_[r].close();
          done[r] = true;
          ++doneCount;
        } else if (frame.type == FrameType::Contribute) {
          contributions[r] = std::move(frame.payload);
          contributed[r] = true;
          ++contributedCount;
        } else {
          return Status(fwAuthError, "rank " + std::to_string(r) + " sent an unexpected bootstrap frame");
        }
      }
      if (contributedCount > 0 && contributedCount + doneCount == nranks_) {
        if (doneCount > 0) {
          return Status(fwRemoteError, "some ranks left the bootstrap while others still needed an allgather");
        }
        FW_RETURN_IF_ERROR(sendGathered(contributions, deadline));
        contributed.assign(nranks_, false);
        contributedCount = 0;
        deadline = deadlineAfterMs(timeoutMs_);
      }
    }
    return Status::ok();
  }

  Status sendGathered(const std::vector<std::vector<uint8_t>>& contributions, Deadline deadline) {
    std::vector<uint8_t> payload;
    for (const auto& c : contributions) {
      appendU64(&payload, c.size());
      payload.insert(payload.end(), c.begin(), c.end());
    }
    for (int r = 0; r < nranks_; ++r) {
      Status st = sendFrame(ranks_[r], FrameType::Gathered, payload.data(), payload.size(), deadline);
      if (!st.isOk()) return Status(fwRemoteError, "rank " + std::to_string(r) + ": " + st.message());
    }
    return Status::ok();
  }

  void broadcastError(const std::string& why) {
    for (Socket& s : ranks_) {
      if (s.valid()) (void)sendFrame(s, FrameType::Error, why.data(), why.size(), deadlineAfterMs(500));
    }
  }

  Socket listener_;
  uint8_t secret_[kSecretBytes];
  int64_t timeoutMs_;
  int nranks_ = 0;
  int admitted_ = 0;
  std::vector<Socket> ranks_;
};

}  // namespace

Status startBootstrapRoot(const SocketAddress& listenAddress, const uint8_t secret[kSecretBytes],
                          int64_t timeoutMs, BootstrapId* id) {
  Socket listener;
  FW_RETURN_IF_ERROR(Socket::listenOn(listenAddress, &listener, &id->root));
  std::memcpy(id->secret, secret, kSecretBytes);
  FW_LOG(Info, Bootstrap, "bootstrap root listening on %s", id->root.toString().c_str());
  auto root = std::make_shared<BootstrapRoot>(std::move(listener), secret, timeoutMs);
  std::thread([root] { root->run(); }).detach();
  return Status::ok();
}

}  // namespace fairway
