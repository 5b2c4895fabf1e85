#include "comm/local_machine.h"

#include <map>
#include <mutex>

#include "comm/transport_loader.h"
#include "transports/transport.h"
#include "core/log.h"

namespace fairway {
namespace {

Status loadMachine(const Config& config, LocalMachine* m) {
  Status topo = HwTopology::load(config.topoFile, config.topoDumpFile, &m->topology);
  if (!topo.isOk()) {
    if (!config.topoFile.empty() || !config.topoDumpFile.empty()) return topo;
    FW_LOG(Warn, Init, "topology discovery failed, continuing without it: %s", topo.message().c_str());
  }
  Status device = createDeviceRuntime(config.deviceRuntime, config.pluginPath, &m->device);
  if (device.isOk() && config.streamWait == "host-function") m->device->useHostFunctionWaits();
  m->cudaDevice = device.isOk() ? Availability::yes() : Availability::no(device.message());

  // Without a GPU, NCCL (a large library) is not even loaded; nor with a
  // runtime whose device memory is not CUDA memory (the tests' emulation),
  // which brings its own stand-in or none.
  const NativeCollectivesEntry* native = nullptr;
  Status nccl;
  if (!m->cudaDevice.ok) {
    nccl = Status(fwNotAvailable, m->cudaDevice.reason);
  } else if (!m->device->memoryIsCuda()) {
    native = m->device->nativeCollectives();
    if (native == nullptr) {
      nccl = Status(fwNotAvailable, "NCCL needs CUDA memory, and FAIRWAY_DEVICE_RUNTIME=" + config.deviceRuntime +
                                        " has none");
    }
  } else {
    const TransportPlugin* plugin = nullptr;
    nccl = loadTransportPlugin("nccl", config.pluginPath, &plugin);
    if (nccl.isOk() && plugin->native == nullptr) nccl = Status(fwNotAvailable, "the nccl plugin has no collectives");
    if (nccl.isOk()) native = plugin->native;
  }
  if (nccl.isOk()) nccl = native->available();
  if (nccl.isOk()) m->nccl = native;
  m->ncclAvailable = nccl.isOk() ? Availability::yes() : Availability::no(nccl.message());
  return Status::ok();
}

}  // namespace

Status LocalMachine::get(const Config& config, LocalMachine** out) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<LocalMachine>> machines;
  std::lock_guard<std::mutex> lock(mutex);
  const std::string key =
      config.topoFile + '\n' + config.topoDumpFile + '\n' + config.pluginPath + '\n' + config.deviceRuntime + '\n' +
                          config.streamWait;
  auto it = machines.find(key);
  if (it == machines.end()) {
    auto machine = std::make_unique<LocalMachine>();
    FW_RETURN_IF_ERROR(loadMachine(config, machine.get()));
    it = machines.emplace(key, std::move(machine)).first;
  }
  *out = it->second.get();
  return Status::ok();
}

}  // namespace fairway
