// Finds and loads plugins at run time: transports
// (libfairway-transport-NAME.so) and the CUDA device runtime
// (libfairway-device-cuda.so), from FAIRWAY_PLUGIN_PATH, else beside
// libfairway.so or in its fairway/ subdirectory (or, for a program linking
// the core statically, in ../lib and ../lib/fairway from the program).
#pragma once

#include <memory>
#include <string>

#include "transports/device_runtime.h"
#include "transports/transport.h"

namespace fairway {

// Fails with fwNotAvailable and the reason (file missing, dlopen error,
// wrong ABI version).
Status loadTransportPlugin(const std::string& name, const std::string& pluginPath, const TransportPlugin** out);

// As above, then the transport's own refusal, if any.
Status createTransport(const std::string& name, const std::string& pluginPath, const TransportInitArgs& args,
                       std::unique_ptr<Transport>* out);

// kind is FAIRWAY_DEVICE_RUNTIME: "cuda" (libfairway-device-cuda.so), "none"
// (fails: every buffer is host memory) or "host-emulated"
// (libfairway-device-emulated.so, built for the tests and not installed).
Status createDeviceRuntime(const std::string& kind, const std::string& pluginPath,
                           std::unique_ptr<DeviceRuntime>* out);

}  // namespace fairway
