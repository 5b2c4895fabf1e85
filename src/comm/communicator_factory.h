// Forms a communicator through the TCP bootstrap: from a unique id passed
// by the application, or from the launcher's environment.
#pragma once

#include <memory>

#include "bootstrap/unique_id.h"
#include "comm/bootstrap_roles.h"
#include "comm/communicator.h"

namespace fairway {

// `role`: why this process came (bootstrap_roles.h); every rank checks
// everyone's before the communicator forms.
Status createFromBootstrap(const BootstrapId& id, int rank, int nranks, const Config& config,
                           const BootstrapRole& role, std::unique_ptr<Communicator>* out);

// Reads rank, size and root from the launcher's variables (launcher_env.h);
// rank 0 starts the bootstrap root.
Status createFromLauncher(const Config& config, std::unique_ptr<Communicator>* out);

}  // namespace fairway
