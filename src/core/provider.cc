#include "core/provider.h"

namespace fairway {

const char* providerName(Provider provider) {
  switch (provider) {
    case Provider::HostUcx: return "ucx";
    case Provider::DeviceUcx: return "ucx on device memory";
    case Provider::StagedUcx: return "ucx staged through pinned memory";
    case Provider::Nccl: return "nccl";
    case Provider::HostShm: return "shared memory";
  }
  return "?";
}

const char* providerShortName(Provider provider) {
  switch (provider) {
    case Provider::HostUcx: return "ucx";
    case Provider::DeviceUcx: return "ucx";
    case Provider::StagedUcx: return "ucx-staged";
    case Provider::Nccl: return "nccl";
    case Provider::HostShm: return "shm";
  }
  return "?";
}

}  // namespace fairway
