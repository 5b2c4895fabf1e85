// What each rank tells the others when a communicator forms.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace fairway {

struct PeerInfo {
  int32_t pid = 0;
  std::string host;           // real host name: for liveness checks
  std::string pidNamespace;   // pids compare only within one namespace
  std::string nodeId;         // node for grouping (FAIRWAY_NODE_ID aware)
  std::string gpuBusId;       // PCI bus id of the GPU this rank drives, empty without one
  bool hasCudaDevice = false; // the CUDA runtime plugin loaded and sees a GPU
  bool hasNccl = false;       // the NCCL plugin loaded and is usable
  bool ucxReachesDeviceMemory = false;  // its UCX can send from and receive into its device memory
  std::vector<uint8_t> transportAddress;  // of the intra-node transport

  static PeerInfo forThisProcess(const std::string& nodeIdOverride);
  std::vector<uint8_t> encode() const;
  // Rejects truncated or oversized records.
  static Status decode(const std::vector<uint8_t>& bytes, PeerInfo* out);
  // Whether this process can check peer's pid directly.
  bool sharesProcessSpaceWith(const PeerInfo& peer) const;
};

// Whether pid is gone or a zombie (killed but not yet reaped).
bool processHasExited(int32_t pid);

}  // namespace fairway
