#include "p2p/peer_info.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include "bootstrap/wire.h"
#include "topo/node_identity.h"

namespace fairway {
namespace {

std::string readPidNamespace() {
  char target[128] = {};
  ssize_t n = readlink("/proc/self/ns/pid", target, sizeof(target) - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

void appendBytes(std::vector<uint8_t>* out, const void* data, size_t bytes) {
  appendU32(out, static_cast<uint32_t>(bytes));
  auto* p = static_cast<const uint8_t*>(data);
  out->insert(out->end(), p, p + bytes);
}

bool readBytes(const std::vector<uint8_t>& in, size_t* pos, std::vector<uint8_t>* out) {
  if (in.size() - *pos < 4) return false;
  uint32_t n = readU32(in.data() + *pos);
  *pos += 4;
  if (n > in.size() - *pos) return false;
  out->assign(in.begin() + *pos, in.begin() + *pos + n);
  *pos += n;
  return true;
}

}  // namespace

PeerInfo PeerInfo::forThisProcess(const std::string& nodeIdOverride) {
  PeerInfo info;
  info.pid = static_cast<int32_t>(getpid());
  info.host = hostName();
  info.pidNamespace = readPidNamespace();
  info.nodeId = nodeIdentity(nodeIdOverride);
  return info;
}

std::vector<uint8_t> PeerInfo::encode() const {
  std::vector<uint8_t> out;
  appendU32(&out, static_cast<uint32_t>(pid));
  appendU32(&out, (hasCudaDevice ? 1u : 0u) | (hasNccl ? 2u : 0u) | (ucxReachesDeviceMemory ? 4u : 0u));
  appendBytes(&out, host.data(), host.size());
  appendBytes(&out, pidNamespace.data(), pidNamespace.size());
  appendBytes(&out, nodeId.data(), nodeId.size());
  appendBytes(&out, gpuBusId.data(), gpuBusId.size());
  appendBytes(&out, transportAddress.data(), transportAddress.size());
  return out;
}

Status PeerInfo::decode(const std::vector<uint8_t>& bytes, PeerInfo* out) {
  if (bytes.size() < 8) return Status(fwAuthError, "truncated peer record");
  out->pid = static_cast<int32_t>(readU32(bytes.data()));
  uint32_t flags = readU32(bytes.data() + 4);
  out->hasCudaDevice = (flags & 1u) != 0;
  out->hasNccl = (flags & 2u) != 0;
  out->ucxReachesDeviceMemory = (flags & 4u) != 0;
  size_t pos = 8;
  std::vector<uint8_t> host, ns, node, gpu;
  if (!readBytes(bytes, &pos, &host) || !readBytes(bytes, &pos, &ns) || !readBytes(bytes, &pos, &node) ||
      !readBytes(bytes, &pos, &gpu) || !readBytes(bytes, &pos, &out->transportAddress) || pos != bytes.size()) {
    return Status(fwAuthError, "malformed peer record");
  }
  out->host.assign(host.begin(), host.end());
  out->pidNamespace.assign(ns.begin(), ns.end());
  out->nodeId.assign(node.begin(), node.end());
  out->gpuBusId.assign(gpu.begin(), gpu.end());
  return Status::ok();
}

bool PeerInfo::sharesProcessSpaceWith(const PeerInfo& peer) const {
  return !pidNamespace.empty() && host == peer.host && pidNamespace == peer.pidNamespace;
}

bool processHasExited(int32_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;  // no /proc: trust kill()
  char state = '?';
  // Format: pid (comm) state ...; comm may hold spaces, so find the last ')'.
  char line[512];
  size_t n = std::fread(line, 1, sizeof(line) - 1, f);
  std::fclose(f);
  line[n] = '\0';
  const char* close = std::strrchr(line, ')');
  if (close != nullptr && close[1] == ' ') state = close[2];
  return state == 'Z' || state == 'X';
}

}  // namespace fairway
