// The notice a rank sends every peer when a communicator breaks or is
// revoked: what kind of end it is (fwRemoteError for a failure,
// fwRevoked for fwCommRevoke), the ranks its sender knows to have failed,
// and the words for the error. Fixed size, so it fits one posted receive.
#pragma once

#include <cstddef>
#include <set>
#include <string>

#include "core/status.h"

namespace fairway {

struct FailureNotice {
  static constexpr size_t kBytes = 256;

  fwResult_t code = fwRemoteError;  // fwRemoteError or fwRevoked
  std::set<int> failed;             // as many as fit; the text names the first cause
  std::string text;

  // Into out (kBytes): a header line, then the text, cut to fit.
  void encode(char* out) const;
  // From a received notice; false if it is not one (the text is then the bytes as they came).
  static bool decode(const char* in, FailureNotice* out);
};

}  // namespace fairway
