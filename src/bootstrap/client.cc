#include "bootstrap/client.h"

#include <cstring>

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
  FW_RETURN_IF_ERROR(Socket::connectTo(id.root, deadline, &out->socket_));
  Hello hello{};
  std::memcpy(hello.secret, id.secret, kSecretBytes);
  hello.rank = static_cast<uint32_t>(rank);
  hello.nranks = static_cast<uint32_t>(nranks);
  std::vector<uint8_t> payload = encodeHello(hello);
  FW_RETURN_IF_ERROR(sendFrame(out->socket_, FrameType::Hello, payload.data(), payload.size(), deadline));
  Frame answer;
  FW_RETURN_IF_ERROR(recvFrame(out->socket_, kMaxContributionBytes, deadline, &answer).withContext("bootstrap root"));
  if (answer.type == FrameType::Error) return rootError(answer);
  if (answer.type != FrameType::Welcome) return Status(fwAuthError, "bootstrap root sent an unexpected frame");
  out->nranks_ = nranks;
  out->timeoutMs_ = timeoutMs;
  return Status::ok();
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
  all->assign(nranks_, {});
  size_t pos = 0;
  const std::vector<uint8_t>& p = frame.payload;
  for (int r = 0; r < nranks_; ++r) {
    if (p.size() - pos < 8) return Status(fwAuthError, "bootstrap root sent a truncated allgather");
    uint64_t length = readU64(p.data() + pos);
    pos += 8;
    if (length > kMaxContributionBytes || length > p.size() - pos) {
      return Status(fwAuthError, "bootstrap root sent a malformed allgather");
    }
    (*all)[r].assign(p.begin() + pos, p.begin() + pos + length);
    pos += length;
  }
  if (pos != p.size()) return Status(fwAuthError, "bootstrap root sent trailing bytes");
  return Status::ok();
}

void BootstrapClient::leave() {
  if (!socket_.valid()) return;
  (void)sendFrame(socket_, FrameType::Bye, nullptr, 0, deadlineAfterMs(1000));
  socket_.close();
}

}  // namespace fairway
