#include "p2p/failure_notice.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fairway {
namespace {

// "FWN1 <code> <rank,rank,...|->\n<text>"
constexpr char kMagic[] = "FWN1 ";

}  // namespace

void FailureNotice::encode(char* out) const {
  std::string header = std::string(kMagic) + std::to_string(static_cast<int>(code)) + " ";
  std::string ranks;
  for (int r : failed) {
    std::string next = (ranks.empty() ? "" : ",") + std::to_string(r);
    if (header.size() + ranks.size() + next.size() + 2 > kBytes / 2) break;  // half the notice at most
    ranks += next;
  }
  header += (ranks.empty() ? "-" : ranks) + "\n";
  std::snprintf(out, kBytes, "%s%s", header.c_str(), text.c_str());
}

bool FailureNotice::decode(const char* in, FailureNotice* out) {
  const std::string notice(in, strnlen(in, kBytes));
  *out = FailureNotice{};
  const size_t newline = notice.find('\n');
  if (notice.compare(0, sizeof kMagic - 1, kMagic) != 0 || newline == std::string::npos) {
    out->text = notice;
    return false;
  }
  const std::string header = notice.substr(sizeof kMagic - 1, newline - (sizeof kMagic - 1));
  out->text = notice.substr(newline + 1);
  char* end = nullptr;
  const long code = std::strtol(header.c_str(), &end, 10);
  out->code = code == fwRevoked ? fwRevoked : fwRemoteError;
  if (end == nullptr || *end != ' ') return false;
  const char* list = end + 1;
  while (*list != '\0' && *list != '-') {
    const long r = std::strtol(list, &end, 10);
    if (end == list || r < 0) return false;
    out->failed.insert(static_cast<int>(r));
    list = *end == ',' ? end + 1 : end;
    if (*end != ',') break;
  }
  return true;
}

}  // namespace fairway
