#include "bootstrap/client.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "core/log.h"

namespace fairway {
namespace {

Status rootError(const Frame& frame) {
  std::string why(frame.payload.begin(), frame.payload.end());
  bool auth = why.find("secret") != std::string::npos;
  return Status(auth ? fwAuthError : fwRemoteError, "bootstrap root: " + why);
}

}  // namespace

Status BootstrapClient::join(const BootstrapId& id, int rank, int nranks, int64_t timeoutMs, BootstrapClient* out) {
  Deadline deadline = deadlineAfterMs(timeoutMs);
  Hello hello{};
  std::memcpy(hello.secret, id.secret, kSecretBytes);
  hello.rank = static_cast<uint32_t>(rank);
  hello.nranks = static_cast<uint32_t>(nranks);
  std::vector<uint8_t> payload = encodeHello(hello);
  auto backoff = std::chrono::milliseconds(10);
  for (;;) {
    FW_RETURN_IF_ERROR(Socket::connectTo(id.root, deadline, &out->socket_));
    Frame answer;
    Status st = sendFrame(out->socket_, FrameType::Hello, payload.data(), payload.size(), deadline);
    if (st.isOk()) st = recvFrame(out->socket_, kMaxContributionBytes, deadline, &answer);
    // A root flooded with connections may close this one unanswered to
    // make room (it answers every hello it reads): try again.
    if (st.code() == fwRemoteError && Clock::now() + backoff < deadline) {
      FW_LOG(Info, Bootstrap, "bootstrap root closed the connection before answering; joining again");
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
      continue;
    }
    FW_RETURN_IF_ERROR(st.withContext("bootstrap root"));
    if (answer.type == FrameType::Error) return rootError(answer);
    if (answer.type != FrameType::Welcome) return Status(fwAuthError, "bootstrap root sent an unexpected frame");
    out->nranks_ = nranks;
    out->timeoutMs_ = timeoutMs;
    return Status::ok();
  }
}

Status BootstrapClient::allgather(const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>* all) {
  if (mine.size() > kMaxContributionBytes) {
    return Status(fwInternalError, "bootstrap contribution of " + std::to_string(mine.size()) + " bytes is too large");
  }
  // The root answers once every rank has joined and contributed; allow for
  // the root's own wait on the slowest rank before declaring it lost.
  Deadline deadline = deadlineAfterMs(2 * timeoutMs_ + 1000);
  FW_RETURN_IF_ERROR(sendFrame(socket_, FrameType::Contribute, mine.data(), mine.size(), deadline));
  Frame frame;
  size_t maxPayload = static_cast<size_t>(nranks_) * (kMaxContributionBytes + 8);
  Status st = recvFrame(socket_, maxPayload, deadline, &frame);
  if (!st.isOk()) return st.withContext("bootstrap");
  if (frame.type == FrameType::Error) return rootError(frame);
  if (frame.type != FrameType::Gathered) return Status(fwAuthError, "bootstrap root sent an unexpected frame");
  return decodeGathered(frame.payload, nranks_, all);
}

void BootstrapClient::leave() {
  if (!socket_.valid()) return;
  (void)sendFrame(socket_, FrameType::Bye, nullptr, 0, deadlineAfterMs(1000));
  socket_.close();
}

}  // namespace fairway
