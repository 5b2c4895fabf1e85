// Finds and loads transport plugins (libfairway-transport-NAME.so) at run
// time: from FAIRWAY_PLUGIN_PATH, else beside libfairway.so or in its
// fairway/ subdirectory.
#pragma once

#include <memory>
#include <string>

#include "transports/transport.h"

namespace fairway {

// Fails with fwNotAvailable and the reason (file missing, dlopen error,
// wrong ABI version, or the transport's own refusal).
Status createTransport(const std::string& name, const std::string& pluginPath, const TransportInitArgs& args,
                       std::unique_ptr<Transport>* out);

}  // namespace fairway
