// Who moves a collective's data: one name shared by the transport plan
// (which providers device buffers have at each level) and the selection
// table (which provider serves each phase of a chosen algorithm).
#pragma once

namespace fairway {

enum class Provider {
  HostUcx,    // Fairway's point-to-point algorithms over UCX, host memory
  DeviceUcx,  // the same algorithms, UCX on the device memory itself
  StagedUcx,  // the same algorithms on pinned host copies of device memory
  Nccl,       // NCCL's collective, on the caller's stream
  HostShm,    // the node's shared-memory segment, host memory
};
// As logs and fairway-info describe it: "ucx staged through pinned memory".
const char* providerName(Provider provider);
// As the plan's lines write it: "ucx", "ucx-staged", "nccl", "shm".
const char* providerShortName(Provider provider);

}  // namespace fairway
