// The secret a job's ranks present to the bootstrap root when they form a
// communicator from a launcher's variables (fwCommInitFromEnv). fwGetUniqueId
// needs none of this: its id carries 16 random bytes.
#pragma once

#include <string>

#include "bootstrap/wire.h"
#include "core/config.h"

namespace fairway {

struct JobSecret {
  uint8_t bytes[kSecretBytes] = {};
  // Where it came from, for messages: "FAIRWAY_JOB_SECRET", the file, or
  // "public values (...)".
  std::string source;
  // True when it was derived from values anyone on the network can learn
  // (root address, world size, the launcher's job id): then any process
  // that reaches the root's port can join the job.
  bool isPublic = false;
};

// From FAIRWAY_JOB_SECRET, else the contents of FAIRWAY_JOB_SECRET_FILE
// (a regular file that no one but its owner may read or write), else
// derived from publicValues. A file that cannot serve is an error naming
// the variable, never a silent fall back to public values.
Status readJobSecret(const Config& config, const std::string& publicValues, JobSecret* out);

}  // namespace fairway
