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

// Plugins stay loaded for the life of the process, like NCCL's.
Status loadPlugin(const std::string& name, const std::string& pluginPath, const TransportPlugin** out) {
  static std::mutex mutex;
  static std::map<std::string, const TransportPlugin*> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(name);
  if (it != loaded.end()) {
    *out = it->second;
    return Status::ok();
  }
  const std::string file = "libfairway-transport-" + name + ".so";
  std::vector<std::string> candidates;
  if (!pluginPath.empty()) {
    candidates.push_back(pluginPath + "/" + file);
  } else {
    std::string dir = directoryOfThisLibrary();
    candidates.push_back(dir + "/" + file);
    candidates.push_back(dir + "/fairway/" + file);
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
    auto entry = reinterpret_cast<FairwayTransportPluginEntry>(dlsym(handle, FAIRWAY_TRANSPORT_PLUGIN_SYMBOL));
    const TransportPlugin* plugin = entry ? entry() : nullptr;
    if (plugin == nullptr || plugin->abiVersion != kTransportAbiVersion) {
      errors += " " + path + ": not a Fairway transport plugin of ABI version " +
                std::to_string(kTransportAbiVersion) + ";";
      dlclose(handle);
      continue;
    }
    FW_LOG(Info, Init, "loaded transport plugin %s", path.c_str());
    loaded[name] = plugin;
    *out = plugin;
    return Status::ok();
  }
  return Status(fwNotAvailable, "transport '" + name + "' could not be loaded:" + errors);
}

}  // namespace

Status createTransport(const std::string& name, const std::string& pluginPath, const TransportInitArgs& args,
                       std::unique_ptr<Transport>* out) {
  const TransportPlugin* plugin = nullptr;
  FW_RETURN_IF_ERROR(loadPlugin(name, pluginPath, &plugin));
  return plugin->create(args, out).withContext("transport '" + name + "'");
}

}  // namespace fairway
