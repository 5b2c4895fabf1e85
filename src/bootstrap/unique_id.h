// What fwUniqueId carries: the bootstrap root's address and the job secret.
#pragma once

#include "bootstrap/socket.h"
#include "bootstrap/wire.h"

namespace fairway {

struct BootstrapId {
  SocketAddress root;
  uint8_t secret[kSecretBytes] = {};
};

void encodeUniqueId(const BootstrapId& id, fwUniqueId* out);
// Rejects ids that were not made by fwGetUniqueId (bad magic or address).
Status decodeUniqueId(const fwUniqueId& in, BootstrapId* out);
Status randomSecret(uint8_t secret[kSecretBytes]);
// A secret derived from text (FAIRWAY_JOB_SECRET or the launcher's job id).
void secretFromText(const std::string& text, uint8_t secret[kSecretBytes]);

}  // namespace fairway
