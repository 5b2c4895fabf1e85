// The bootstrap root: a thread in one process of the job (the one that made
// the unique id, or rank 0 under a launcher) that admits the job's ranks and
// serves the allgathers they need to form a communicator.
#pragma once

#include "bootstrap/unique_id.h"

namespace fairway {

// Listens on listenAddress (port 0 picks one), starts the root thread, and
// fills *id with the address ranks must connect to. The thread admits ranks
// that present the secret, serves allgather rounds until every rank says
// goodbye, and gives up (telling every rank why) after timeoutMs without
// progress. It owns its state and ends by itself.
Status startBootstrapRoot(const SocketAddress& listenAddress, const uint8_t secret[kSecretBytes],
                          int64_t timeoutMs, BootstrapId* id);

// Stops the root this process started for id: it admits no more ranks and
// tells those it admitted why. An id of another process, or of a root that
// has ended, gets fwInvalidUsage.
Status stopBootstrapRoot(const BootstrapId& id);

}  // namespace fairway
