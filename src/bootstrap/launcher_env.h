// Where fwCommInitFromEnv learns rank, size and the bootstrap root.
#pragma once

#include <string>

#include "bootstrap/unique_id.h"
#include "core/config.h"

namespace fairway {

struct LauncherEnvironment {
  std::string launcher;  // which variables supplied the rank, for messages
  int rank = 0;
  int size = 0;
  BootstrapId id;        // the root's address and the job secret
  bool hostsRoot = false;  // rank 0 runs the root, listening on id.root's port
};

// Rank/size from FAIRWAY_RANK/FAIRWAY_WORLD_SIZE, torchrun's RANK/WORLD_SIZE,
// Open MPI's OMPI_COMM_WORLD_RANK/SIZE, or Slurm's SLURM_PROCID/SLURM_NTASKS.
// Root from FAIRWAY_COMM_ID=host:port, else MASTER_ADDR and MASTER_PORT+1
// (MASTER_PORT itself belongs to torchrun's store). Secret from
// FAIRWAY_JOB_SECRET, else from the launcher's job id.
Status readLauncherEnvironment(const Config& config, LauncherEnvironment* out);

// Whether any launcher's rank and size variables are set.
bool launchedByLauncher();

}  // namespace fairway
