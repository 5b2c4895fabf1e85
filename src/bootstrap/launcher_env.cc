#include "bootstrap/launcher_env.h"

#include <cstdlib>
#include <cstring>

#include "core/environment.h"
#include "core/log.h"

namespace fairway {
namespace {

Status parseNonNegative(const char* name, const char* text, int* out) {
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > (1 << 20)) {
    return Status(fwInvalidArgument, std::string(name) + "=" + text + " is not a rank count or index");
  }
  *out = static_cast<int>(value);
  return Status::ok();
}

struct RankSource {
  const char* launcher;
  const char* rankVar;
  const char* sizeVar;
};

const RankSource kRankSources[] = {
    {"fairwayrun", "FAIRWAY_RANK", "FAIRWAY_WORLD_SIZE"},
    {"torchrun", "RANK", "WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS"},
};

// Identifies this job among others on the same root address.
std::string launcherJobId() {
  if (const char* v = environmentValue("TORCHELASTIC_RUN_ID")) return std::string("torchrun:") + v;
  if (const char* job = environmentValue("SLURM_JOB_ID")) {
    const char* step = environmentValue("SLURM_STEP_ID");
    return std::string("slurm:") + job + "." + (step ? step : "");
  }
  if (const char* v = environmentValue("OMPI_MCA_ess_base_jobid")) return std::string("ompi:") + v;
  if (const char* v = environmentValue("PMIX_NAMESPACE")) return std::string("pmix:") + v;
  return "";
}

}  // namespace

bool launchedByLauncher() {
  for (const RankSource& s : kRankSources) {
    if (environmentValue(s.rankVar) && environmentValue(s.sizeVar)) return true;
  }
  return false;
}

Status readLauncherEnvironment(const Config& config, LauncherEnvironment* out) {
  const RankSource* source = nullptr;
  for (const RankSource& s : kRankSources) {
    if (environmentValue(s.rankVar) && environmentValue(s.sizeVar)) { source = &s; break; }
  }
  if (source == nullptr) {
    return Status(fwInvalidUsage,
                  "no launcher environment: set FAIRWAY_RANK/FAIRWAY_WORLD_SIZE, or start under fairwayrun, torchrun, "
                  "mpirun (Open MPI) or srun");
  }
  out->launcher = source->launcher;
  FW_RETURN_IF_ERROR(parseNonNegative(source->rankVar, environmentValue(source->rankVar), &out->rank));
  FW_RETURN_IF_ERROR(parseNonNegative(source->sizeVar, environmentValue(source->sizeVar), &out->size));
  if (out->size < 1 || out->rank >= out->size) {
    return Status(fwInvalidRank, std::string(source->rankVar) + "=" + std::to_string(out->rank) + " is not below " +
                                     source->sizeVar + "=" + std::to_string(out->size));
  }

  std::string root;
  if (!config.commId.empty()) {
    root = config.commId;
  } else if (environmentValue("MASTER_ADDR") && environmentValue("MASTER_PORT")) {
    int port = 0;
    FW_RETURN_IF_ERROR(parseNonNegative("MASTER_PORT", environmentValue("MASTER_PORT"), &port));
    if (port < 1 || port >= 65535) return Status(fwInvalidArgument, "MASTER_PORT must be in [1, 65534]");
    root = std::string(environmentValue("MASTER_ADDR")) + ":" + std::to_string(port + 1);
  } else {
    return Status(fwInvalidUsage, "no bootstrap root: set FAIRWAY_COMM_ID=host:port (host = rank 0's node), or "
                                  "MASTER_ADDR and MASTER_PORT");
  }
  FW_RETURN_IF_ERROR(parseHostPort(root, &out->id.root).withContext("bootstrap root"));

  std::string jobId = launcherJobId();
  std::string publicValues = (jobId.empty() ? "" : jobId + " ") + "root " + root + " size " + std::to_string(out->size);
  FW_RETURN_IF_ERROR(readJobSecret(config, publicValues, &out->secret));
  std::memcpy(out->id.secret, out->secret.bytes, kSecretBytes);
  out->hostsRoot = out->rank == 0;
  if (!out->hostsRoot) return Status::ok();
  FW_RETURN_IF_ERROR(chooseRootListenAddress(out->id.root, config.socketIfname, &out->listenAddress));
  if (out->secret.isPublic) {
    FW_LOG(Warn, Bootstrap,
           "no FAIRWAY_JOB_SECRET or FAIRWAY_JOB_SECRET_FILE: the job secret is derived from %s, so any process "
           "that reaches %s can join this job and stall or break it. Give every rank the same secret: "
           "FAIRWAY_JOB_SECRET, or FAIRWAY_JOB_SECRET_FILE naming a file only you can read (fairwayrun makes one "
           "itself)",
           out->secret.source.c_str(), out->listenAddress.toString().c_str());
  }
  return Status::ok();
}

Status chooseRootListenAddress(const SocketAddress& advertised, const std::string& socketIfname,
                               SocketAddress* out) {
  if (isAddressOfThisHost(advertised)) {
    *out = advertised;
    return Status::ok();
  }
  if (!socketIfname.empty()) {
    SocketAddress local;
    FW_RETURN_IF_ERROR(findInterfaceAddress(socketIfname, &local));
    *out = withPort(local, portOf(advertised));
    FW_LOG(Info, Bootstrap, "bootstrap root: %s is not an address of this host; listening on %s "
                            "(FAIRWAY_SOCKET_IFNAME=%s) instead", advertised.toString().c_str(),
           out->toString().c_str(), socketIfname.c_str());
    return Status::ok();
  }
  return Status(fwInvalidUsage, "bootstrap root: " + advertised.toString() +
                                    " (FAIRWAY_COMM_ID, or MASTER_ADDR and MASTER_PORT+1) is not an address of rank "
                                    "0's host, so its root cannot listen there: name an address this host holds, or "
                                    "set FAIRWAY_SOCKET_IFNAME to the interface to listen on");
}

}  // namespace fairway
