// Where fwCommInitFromEnv learns rank, size and the bootstrap root.
#pragma once

#include <string>

#include "bootstrap/job_secret.h"
#include "bootstrap/unique_id.h"
#include "core/config.h"

namespace fairway {

struct LauncherEnvironment {
  std::string launcher;  // which variables supplied the rank, for messages
  int rank = 0;
  int size = 0;
  BootstrapId id;        // the root's address and the job secret
  JobSecret secret;      // where the secret came from, and whether it is public
  bool hostsRoot = false;  // rank 0 runs the root
  SocketAddress listenAddress;  // where rank 0's root listens (see chooseRootListenAddress)
};

// Rank/size from FAIRWAY_RANK/FAIRWAY_WORLD_SIZE, torchrun's RANK/WORLD_SIZE,
// Open MPI's OMPI_COMM_WORLD_RANK/SIZE, or Slurm's SLURM_PROCID/SLURM_NTASKS.
// Root from FAIRWAY_COMM_ID=host:port, else MASTER_ADDR and MASTER_PORT+1
// (MASTER_PORT itself belongs to torchrun's store). Secret from
// FAIRWAY_JOB_SECRET or FAIRWAY_JOB_SECRET_FILE, else derived from public
// values (the launcher's job id, the root address and the world size), in
// which case rank 0 logs one warning saying so.
Status readLauncherEnvironment(const Config& config, LauncherEnvironment* out);

// Where rank 0's root listens: on the advertised address itself when it is
// one of this host's (only that interface, never every one); else on
// FAIRWAY_SOCKET_IFNAME's address at the same port when that is set (for a
// MASTER_ADDR that names this host by an address it does not hold, e.g.
// behind NAT); else the advertised address is an error naming the fix.
Status chooseRootListenAddress(const SocketAddress& advertised, const std::string& socketIfname,
                               SocketAddress* out);

// Whether any launcher's rank and size variables are set.
bool launchedByLauncher();

}  // namespace fairway
