#include "comm/communicator_factory.h"

#include "bootstrap/client.h"
#include "bootstrap/launcher_env.h"
#include "bootstrap/root.h"
#include "core/log.h"

namespace fairway {

Status createFromBootstrap(const BootstrapId& id, int rank, int nranks, const Config& config,
                           const BootstrapRole& role, std::unique_ptr<Communicator>* out) {
  BootstrapClient client;
  FW_RETURN_IF_ERROR(BootstrapClient::join(id, rank, nranks, config.timeoutMs, &client));
  Communicator::OobAllgather oob = [&](const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>* all) {
    return client.allgather(mine, all);
  };
  std::vector<std::vector<uint8_t>> roles;
  Status st = oob(role.encode(), &roles);
  if (st.isOk()) st = checkBootstrapRoles(roles);
  if (st.isOk()) st = Communicator::create(oob, rank, nranks, config, out);
  client.leave();
  return st;
}

Status createFromLauncher(const Config& config, std::unique_ptr<Communicator>* out) {
  LauncherEnvironment launch;
  FW_RETURN_IF_ERROR(readLauncherEnvironment(config, &launch));
  if (launch.hostsRoot) {
    BootstrapId bound;
    FW_RETURN_IF_ERROR(startBootstrapRoot(launch.listenAddress, launch.id.secret, config.timeoutMs, &bound));
  }
  FW_LOG(Info, Init, "rank %d of %d from %s, bootstrap root %s", launch.rank, launch.size, launch.launcher.c_str(),
         launch.id.root.toString().c_str());
  return createFromBootstrap(launch.id, launch.rank, launch.size, config, BootstrapRole::init(), out);
}

}  // namespace fairway
