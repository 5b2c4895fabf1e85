// Every FAIRWAY_* variable in one table: its name, its default as
// docs/environment.md shows it, one line of meaning, and for the settings a
// communicator takes, how a value goes into a Config and how the value in
// effect reads. Config::fromVariables is a loop over it (defined in
// config_variables.cc), `fairway-info --config` prints it, and a unit test
// fails when docs/environment.md says otherwise.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/status.h"

namespace fairway {

// Who reads a variable: a communicator's Config, the logger (which starts
// before any Config), or the launcher support (rank and size).
enum class VariableReader { Config, Logger, Launcher };

struct ConfigVariable {
  const char* name;
  const char* defaultText;  // as docs/environment.md shows it: a value, a description, or empty
  const char* meaning;      // docs/environment.md's line, markdown
  VariableReader reader;
  // Config variables only: applies a set value (failing with a message
  // that names the variable), and shows the value in effect ("" if unset).
  std::function<Status(const char* text, Config* config)> apply;
  std::function<std::string(const Config& config)> show;
};

// In docs/environment.md's order.
const std::vector<ConfigVariable>& configVariables();

}  // namespace fairway
