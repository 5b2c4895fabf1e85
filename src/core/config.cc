#include "core/config.h"

#include "core/config_variables.h"
#include "core/environment.h"

namespace fairway {

Status Config::fromEnvironment(Config* out) {
  return fromVariables(environmentValue, out);
}

Status Config::fromVariables(const VariableLookup& lookup, Config* out) {
  Config config;
  for (const ConfigVariable& variable : configVariables()) {
    if (variable.reader != VariableReader::Config) continue;
    const char* text = lookup(variable.name);
    if (text == nullptr || *text == '\0') continue;  // unset or empty: the default
    FW_RETURN_IF_ERROR(variable.apply(text, &config));
  }
  *out = config;
  return Status::ok();
}

}  // namespace fairway
