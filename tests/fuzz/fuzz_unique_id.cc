// libFuzzer target: fwUniqueId bytes as fwCommInitRank receives them from
// the application, which may pass anything. A decoded id must encode back
// to an id that decodes to the same root and secret.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "bootstrap/unique_id.h"

using namespace fairway;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fwUniqueId id;
  std::memset(&id, 0, sizeof(id));
  std::memcpy(&id, data, size < sizeof(id) ? size : sizeof(id));
  BootstrapId decoded;
  if (!decodeUniqueId(id, &decoded).isOk()) return 0;
  (void)decoded.root.toString();
  fwUniqueId again;
  encodeUniqueId(decoded, &again);
  BootstrapId twice;
  if (!decodeUniqueId(again, &twice).isOk()) __builtin_trap();
  if (twice.root.length != decoded.root.length ||
      std::memcmp(&twice.root.storage, &decoded.root.storage, decoded.root.length) != 0 ||
      std::memcmp(twice.secret, decoded.secret, kSecretBytes) != 0) {
    __builtin_trap();
  }
  return 0;
}
