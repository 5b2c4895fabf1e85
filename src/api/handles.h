// The objects behind fwComm_t and fwRequest_t. Live communicators are kept
// in a registry so a destroyed or forged handle is refused, never followed.
#pragma once

#include <memory>

#include "comm/communicator.h"

struct fwComm {
  std::unique_ptr<fairway::Communicator> impl;
};

struct fwRequest {
  fwComm_t comm = nullptr;
  std::shared_ptr<fairway::AsyncOperation> operation;  // a collective
  fairway::Pending message;                            // or a send/recv
};

namespace fairway {

fwComm_t registerComm(std::unique_ptr<Communicator> impl);
// The communicator behind handle, or fwInvalidComm naming why not.
Status lookupComm(fwComm_t handle, Communicator** out);
// Removes handle from the registry and frees it.
void unregisterComm(fwComm_t handle);

}  // namespace fairway
