#include "comm/transport_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <vector>

#include "core/log.h"

namespace fairway {
namespace {

std::string directoryOfThisLibrary() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&directoryOfThisLibrary), &info) == 0 || info.dli_fname == nullptr) return ".";
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Returns the plugin's entry point's result, or why none was usable. The
// check rejects a library whose ABI version differs. Plugins stay loaded for
// the life of the process, like NCCL's.
template <typename Plugin>
Status loadPlugin(const std::string& file, const char* symbol, int abiVersion, const std::string& pluginPath,
                  const Plugin** out) {
  static std::mutex mutex;
  static std::map<std::string, const void*> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(file);
  if (it != loaded.end()) {
    *out = static_cast<const Plugin*>(it->second);
    return Status::ok();
  }
  std::vector<std::string> candidates;
  if (!pluginPath.empty()) {
    candidates.push_back(pluginPath + "/" + file);
  } else {
    std::string dir = directoryOfThisLibrary();
    candidates.push_back(dir + "/" + file);
    candidates.push_back(dir + "/fairway/" + file);
    // Tools that link the core statically live in bin/, beside lib/.
    const std::string libdir = dir + "/../" FAIRWAY_INSTALL_LIBDIR;
    candidates.push_back(libdir + "/" + file);
    candidates.push_back(libdir + "/fairway/" + file);
  }
  std::string errors;
  for (const std::string& path : candidates) {
    if (access(path.c_str(), R_OK) != 0) {
      errors += " " + path + ": not found;";
      continue;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      errors += " " + path + ": " + dlerror() + ";";
      continue;
    }
    using Entry = const Plugin* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(handle, symbol));
    const Plugin* plugin = entry ? entry() : nullptr;
    if (plugin == nullptr || plugin->abiVersion != abiVersion) {
      errors += " " + path + ": " +
                (plugin == nullptr ? std::string("no ") + symbol + " entry, not a Fairway plugin"
                                   : "plugin ABI version " + std::to_string(plugin->abiVersion) +
                                         ", this libfairway needs " + std::to_string(abiVersion)) +
                ";";
      dlclose(handle);
      continue;
    }
    FW_LOG(Info, Init, "loaded plugin %s", path.c_str());
    loaded[file] = plugin;
    *out = plugin;
    return Status::ok();
  }
  return Status(fwNotAvailable, file + " could not be loaded:" + errors);
}

}  // namespace

Status loadTransportPlugin(const std::string& name, const std::string& pluginPath, const TransportPlugin** out) {
  return loadPlugin("libfairway-transport-" + name + ".so", FAIRWAY_TRANSPORT_PLUGIN_SYMBOL, kTransportAbiVersion,
                    pluginPath, out)
      .withContext("transport '" + name + "'");
}

Status createTransport(const std::string& name, const std::string& pluginPath, const TransportInitArgs& args,
                       std::unique_ptr<Transport>* out) {
  const TransportPlugin* plugin = nullptr;
  FW_RETURN_IF_ERROR(loadTransportPlugin(name, pluginPath, &plugin));
  if (plugin->create == nullptr) {
    return Status(fwNotAvailable, "transport '" + name + "' has no point-to-point transport");
  }
  FW_RETURN_IF_ERROR(plugin->create(args, out).withContext("transport '" + name + "'"));
  // One per level per communicator: tests count these lines.
  FW_LOG(Info, Transport, "rank %d: transport '%s' created (%s level)", args.rank, name.c_str(),
         args.networkOnly ? "inter-node" : "intra-node");
  return Status::ok();
}

Status createDeviceRuntime(const std::string& kind, const std::string& pluginPath,
                           std::unique_ptr<DeviceRuntime>* out) {
  if (kind == "none") return Status(fwNotAvailable, "FAIRWAY_DEVICE_RUNTIME=none");
  const bool emulated = kind == "host-emulated";
  const DeviceRuntimePlugin* plugin = nullptr;
  Status loaded = loadPlugin(emulated ? "libfairway-device-emulated.so" : "libfairway-device-cuda.so",
                             FAIRWAY_DEVICE_RUNTIME_SYMBOL, kDeviceRuntimeAbiVersion, pluginPath, &plugin);
  if (emulated && !loaded.isOk()) {
    return loaded.withContext("FAIRWAY_DEVICE_RUNTIME=host-emulated is for Fairway's own tests, from its build tree");
  }
  FW_RETURN_IF_ERROR(loaded);
  FW_RETURN_IF_ERROR(plugin->create(out));
  if (emulated) {
    FW_LOG(Warn, Init, "FAIRWAY_DEVICE_RUNTIME=host-emulated: \"device\" memory is host memory, no GPU is used, and "
                       "\"nccl\" is Fairway's own host collectives; this runtime exists to test Fairway's device paths");
  }
  return Status::ok();
}

}  // namespace fairway
