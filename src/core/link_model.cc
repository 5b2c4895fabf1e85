#include "core/link_model.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace fairway {

Status LinkModel::parse(const std::string& variable, const std::string& text, LinkModel* out) {
  const char* start = text.c_str();
  char* end = nullptr;
  errno = 0;
  double alpha = std::strtod(start, &end);
  // strtod also reads "inf" and "nan": a link needs finite numbers.
  bool ok = errno == 0 && end != start && *end == ',' && std::isfinite(alpha) && alpha >= 0;
  double beta = 0;
  if (ok) {
    const char* betaText = end + 1;
    beta = std::strtod(betaText, &end);
    ok = errno == 0 && end != betaText && *end == '\0' && std::isfinite(beta) && beta > 0;
  }
  if (!ok) {
    return Status(fwInvalidArgument, variable + "=" + text +
                                         " is not ALPHA_US,GBPS (latency in microseconds and bandwidth in GB/s, "
                                         "e.g. 10,1.25)");
  }
  *out = LinkModel{alpha, beta};
  return Status::ok();
}

}  // namespace fairway
