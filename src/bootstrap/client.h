// A rank's connection to the bootstrap root: used to form a communicator,
// then closed.
#pragma once

#include <vector>

#include "bootstrap/unique_id.h"

namespace fairway {

class BootstrapClient {
 public:
  // Connects (retrying until the root is up) and presents the job secret.
  static Status join(const BootstrapId& id, int rank, int nranks, int64_t timeoutMs, BootstrapClient* out);

  // Every rank's bytes, indexed by rank. All ranks call it the same number
  // of times; each waits at most timeoutMs for the slowest.
  Status allgather(const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>* all);
  // Tells the root this rank is done; the connection closes.
  void leave();

 private:
  Socket socket_;
  int nranks_ = 0;
  int64_t timeoutMs_ = 0;
};

}  // namespace fairway
