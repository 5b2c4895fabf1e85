#include "core/config_parse.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <limits>

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

namespace {

// Bytes and rank counts as every other variable takes them
// (parseByteText, parseIntegerText); the item's own message says what is wrong.
bool byteCount(const std::string& text, size_t* out) {
  return parseByteText("FAIRWAY_ALGO", text.c_str(), 0, ~size_t{0}, out).isOk();
}
bool rankCount(const std::string& text, int* out) {
  int64_t value = 0;
  if (!parseIntegerText("FAIRWAY_ALGO", text.c_str(), 1, std::numeric_limits<int>::max(), &value).isOk()) return false;
  *out = static_cast<int>(value);
  return true;
}

// "FROM-TO" in bytes (K, M, G: powers of 1024), either end may be left
// out: [FROM, TO), from 0, to no limit.
bool parseByteRange(const std::string& text, size_t* from, size_t* to) {
  const size_t dash = text.find('-');
  if (dash == std::string::npos) return false;
  const std::string low = trim(text.substr(0, dash)), high = trim(text.substr(dash + 1));
  if (!low.empty() && !byteCount(low, from)) return false;
  if (!high.empty() && !byteCount(high, to)) return false;
  return *from < *to;
}

// "ranks=LO-HI", "ranks=LO-" or "ranks=N", inclusive.
bool parseRankRange(const std::string& text, int* low, int* high) {
  const std::string range = trim(text.substr(text.find('=') + 1));
  const size_t dash = range.find('-');
  if (dash == std::string::npos) {
    if (!rankCount(range, low)) return false;
    *high = *low;
    return true;
  }
  const std::string lo = trim(range.substr(0, dash)), hi = trim(range.substr(dash + 1));
  if (!rankCount(lo, low)) return false;
  if (!hi.empty() && !rankCount(hi, high)) return false;
  return *low <= *high;
}

std::string sizeText(size_t bytes) {
  static const char* const kSuffixes[] = {"G", "M", "K"};
  for (int i = 0; i < 3; ++i) {
    const size_t unit = size_t{1} << (30 - 10 * i);
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + kSuffixes[i];
  }
  return std::to_string(bytes);
}

}  // namespace

std::string AlgoOverride::text() const {
  std::string out = collective;
  if (fromBytes != 0 || toBytes != ~size_t{0}) {
    out += ":" + sizeText(fromBytes) + "-" + (toBytes == ~size_t{0} ? "" : sizeText(toBytes));
  }
  if (minRanks != 1 || maxRanks != std::numeric_limits<int>::max()) {
    out += ":ranks=" + std::to_string(minRanks) + "-" +
           (maxRanks == std::numeric_limits<int>::max() ? "" : std::to_string(maxRanks));
  }
  return out + ":" + algorithm;
}

Status parseAlgoOverrides(const char* text, std::vector<AlgoOverride>* out) {
  std::vector<AlgoOverride> items;
  std::string list = text;
  for (char& c : list) c = c == ';' ? ',' : c;
  for (const std::string& item : splitString(list.c_str(), ',')) {
    auto refuse = [&](const std::string& why) {
      return Status(fwInvalidArgument, std::string("FAIRWAY_ALGO=") + text + ": item '" + item + "' " + why +
                                           " (collective[:FROM-TO][:ranks=LO-HI]:algorithm, e.g. "
                                           "allreduce:0-64K:recursive_doubling,allreduce:64K-:ring)");
    };
    std::vector<std::string> fields = splitString(item.c_str(), ':');
    for (std::string& f : fields) f = trim(f);
    if (fields.size() < 2 || fields.size() > 4 || fields.front().empty() || fields.back().empty()) {
      return refuse("is not collective[:sizes][:ranks]:algorithm");
    }
    AlgoOverride o;
    o.collective = fields.front();
    o.algorithm = fields.back();
    bool sizesSeen = false, ranksSeen = false;
    for (size_t i = 1; i + 1 < fields.size(); ++i) {
      const std::string& f = fields[i];
      if (f.rfind("ranks=", 0) == 0) {
        if (ranksSeen || !parseRankRange(f, &o.minRanks, &o.maxRanks)) {
          return refuse("has rank counts '" + f + "' that are not one ranks=LO-HI (LO at least 1, LO <= HI)");
        }
        ranksSeen = true;
      } else if (sizesSeen || !parseByteRange(f, &o.fromBytes, &o.toBytes)) {
        return refuse("has sizes '" + f + "' that are not one FROM-TO byte range (FROM < TO; K, M, G allowed)");
      } else {
        sizesSeen = true;
      }
    }
    items.push_back(o);
  }
  *out = std::move(items);
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
