#include "core/config_parse.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "core/strings.h"

namespace fairway {

Status parseIntegerText(const std::string& name, const char* text, int64_t minValue, int64_t maxValue,
                        int64_t* out) {
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < minValue || value > maxValue) {
    return Status(fwInvalidArgument, name + "=" + text + " is not an integer in [" + std::to_string(minValue) +
                                         ", " + std::to_string(maxValue) + "]");
  }
  *out = value;
  return Status::ok();
}

Status parseByteText(const std::string& name, const char* text, size_t minValue, size_t maxValue, size_t* out) {
  errno = 0;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 10);
  int shift = 0;
  if (end != text && *end != '\0' && end[1] == '\0') {
    switch (*end) {
      case 'K': case 'k': shift = 10; ++end; break;
      case 'M': case 'm': shift = 20; ++end; break;
      case 'G': case 'g': shift = 30; ++end; break;
      default: break;
    }
  }
  const bool overflows = shift > 0 && value > (~0ULL >> shift);
  const bool valid = !(errno != 0 || end == text || *end != '\0' || *text == '-' || overflows);
  if (valid) value <<= shift;
  if (!valid || value < minValue || value > maxValue) {
    return Status(fwInvalidArgument, name + "=" + text + " is not a byte count in [" +
                                         std::to_string(minValue) + ", " + std::to_string(maxValue) +
                                         "] (digits, optionally followed by K, M or G)");
  }
  *out = static_cast<size_t>(value);
  return Status::ok();
}

Status parseChoice(const std::string& name, const char* text, const std::vector<std::string>& choices,
                   std::string* out) {
  std::string list;
  for (const std::string& choice : choices) {
    if (text == choice) {
      *out = text;
      return Status::ok();
    }
    list += (list.empty() ? "" : "|") + choice;
  }
  return Status(fwInvalidArgument, name + "=" + text + " is not one of " + list);
}

Status parseAlgoOverrides(const char* text, std::map<std::string, std::string>* out) {
  for (const std::string& item : splitString(text, ';')) {
    size_t colon = item.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size()) {
      return Status(fwInvalidArgument, std::string("FAIRWAY_ALGO=") + text + ": item '" + item +
                                           "' is not collective:algorithm");
    }
    (*out)[trim(item.substr(0, colon))] = trim(item.substr(colon + 1));
  }
  return Status::ok();
}

// collective:kind[/block][:minbytes];... e.g. "allreduce:int8:1M;allgather:bf16".
Status parseCompressionRules(const char* text, std::map<std::string, CompressionRule>* out) {
  const std::string variable = std::string("FAIRWAY_COMPRESS=") + text;
  for (const std::string& item : splitString(text, ';')) {
    const std::vector<std::string> fields = splitString(item, ':');
    if (fields.size() < 2 || fields.size() > 3) {
      return Status(fwInvalidArgument, variable + ": item '" + item + "' is not collective:kind[/block][:minbytes]");
    }
    const std::string collective = trim(fields[0]);
    if (collective != "allreduce" && collective != "reducescatter" && collective != "allgather") {
      return Status(fwInvalidArgument, variable + ": '" + collective +
                                           "' has no compressed form (allreduce, reducescatter, allgather)");
    }
    std::string kind = trim(fields[1]);
    CompressionRule rule;
    const size_t slash = kind.find('/');
    if (slash != std::string::npos) {
      errno = 0;
      char* end = nullptr;
      const long block = std::strtol(kind.c_str() + slash + 1, &end, 10);
      if (errno != 0 || *end != '\0' || !isValidCompressionBlock(block)) {
        return Status(fwInvalidArgument, variable + ": block size in '" + kind +
                                             "' is not a power of two from 32 to 4096");
      }
      rule.compression.blockSize = static_cast<int>(block);
      kind = kind.substr(0, slash);
    }
    bool known = false;
    for (int k = fwCompressFp16; k < fwNumCompressions; ++k) {
      if (kind == compressionName(static_cast<fwCompressKind_t>(k))) {
        rule.compression.kind = static_cast<fwCompressKind_t>(k);
        known = true;
      }
    }
    if (!known) return Status(fwInvalidArgument, variable + ": '" + kind + "' is not one of fp16|bf16|int8|int4");
    if (collective == "allgather" && rule.compression.blockwise()) {
      return Status(fwInvalidArgument, variable + ": allgather compresses with fp16 or bf16 only");
    }
    if (slash != std::string::npos && !rule.compression.blockwise()) {
      return Status(fwInvalidArgument, variable + ": '" + kind + "' has no block size");
    }
    if (fields.size() == 3) {
      FW_RETURN_IF_ERROR(parseByteText(variable + ": minimum size", trim(fields[2]).c_str(), 0,
                                       size_t{1} << 50, &rule.minBytes));
    }
    (*out)[collective] = rule;
  }
  return Status::ok();
}

std::string byteText(size_t bytes) {
  static const struct { size_t unit; const char* suffix; } kUnits[] = {{size_t{1} << 30, "G"}, {size_t{1} << 20, "M"},
                                                                        {size_t{1} << 10, "K"}};
  for (const auto& u : kUnits) {
    if (bytes >= u.unit && bytes % u.unit == 0) return std::to_string(bytes / u.unit) + u.suffix;
  }
  return std::to_string(bytes);
}

std::string linkText(const LinkModel& link) {
  char text[64];
  std::snprintf(text, sizeof(text), "%g,%g", link.alphaUs, link.gbPerSec);
  return text;
}

}  // namespace fairway
