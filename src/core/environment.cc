#include "core/environment.h"

#include <cstdlib>

namespace fairway {

const char* environmentValue(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

}  // namespace fairway
