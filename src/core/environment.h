// The process environment, read in one place: FAIRWAY_* variables reach
// the library through the table of core/config_variables.h (and the
// logger, which starts before any Config), never through getenv elsewhere.
#pragma once

namespace fairway {

// name's value, or nullptr when it is unset or empty.
const char* environmentValue(const char* name);

}  // namespace fairway
