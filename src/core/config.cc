#include "core/config.h"

#include <cerrno>
#include <cstdlib>

#include "core/strings.h"

namespace fairway {
namespace {

// A variable's value, or nullptr when it is unset or empty.
const char* valueOf(const VariableLookup& lookup, const char* name) {
  const char* value = lookup(name);
  return (value != nullptr && *value != '\0') ? value : nullptr;
}

Status parseInteger(const VariableLookup& lookup, const char* name, int64_t minValue, int64_t maxValue, int64_t* out) {
  const char* text = valueOf(lookup, name);
  if (text == nullptr) return Status::ok();
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < minValue || value > maxValue) {
    return Status(fwInvalidArgument, std::string(name) + "=" + text + " is not an integer in [" +
                                         std::to_string(minValue) + ", " + std::to_string(maxValue) + "]");
  }
  *out = value;
  return Status::ok();
}

// A byte count: digits with an optional K, M or G suffix (powers of 1024),
// as the perf binaries' -b and -e take them. name: what to blame.
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

Status parseBytes(const VariableLookup& lookup, const char* name, size_t minValue, size_t maxValue, size_t* out) {
  const char* text = valueOf(lookup, name);
  if (text == nullptr) return Status::ok();
  return parseByteText(name, text, minValue, maxValue, out);
}

void readString(const VariableLookup& lookup, const char* name, std::string* out) {
  if (const char* text = valueOf(lookup, name)) *out = text;
}

Status parseTransport(const VariableLookup& lookup, const char* name, std::string* out) {
  readString(lookup, name, out);
  if (*out != "auto" && *out != "ucx" && *out != "nccl") {
    return Status(fwInvalidArgument, std::string(name) + "=" + *out + " is not one of auto|ucx|nccl");
  }
  return Status::ok();
}

Status parseList(const VariableLookup& lookup, const char* name, std::vector<std::string>* out) {
  const char* text = valueOf(lookup, name);
  if (text == nullptr) return Status::ok();
  *out = splitString(text, ',');
  if (out->empty()) return Status(fwInvalidArgument, std::string(name) + "=" + text + " names no device");
  return Status::ok();
}

Status parseAlgoOverrides(const VariableLookup& lookup, std::map<std::string, std::string>* out) {
  const char* text = valueOf(lookup, "FAIRWAY_ALGO");
  if (text == nullptr) return Status::ok();
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
Status parseCompressionRules(const VariableLookup& lookup, std::map<std::string, CompressionRule>* out) {
  const char* text = valueOf(lookup, "FAIRWAY_COMPRESS");
  if (text == nullptr) return Status::ok();
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

}  // namespace

Status Config::fromEnvironment(Config* out) {
  return fromVariables([](const char* name) -> const char* { return std::getenv(name); }, out);
}

Status Config::fromVariables(const VariableLookup& lookup, Config* out) {
  Config c;
  FW_RETURN_IF_ERROR(parseInteger(lookup, "FAIRWAY_TIMEOUT_MS", 1, int64_t{1} << 40, &c.timeoutMs));
  FW_RETURN_IF_ERROR(parseTransport(lookup, "FAIRWAY_TRANSPORT", &c.transport));
  FW_RETURN_IF_ERROR(parseTransport(lookup, "FAIRWAY_INTRA_TRANSPORT", &c.intraTransport));
  FW_RETURN_IF_ERROR(parseTransport(lookup, "FAIRWAY_INTER_TRANSPORT", &c.interTransport));
  FW_RETURN_IF_ERROR(parseAlgoOverrides(lookup, &c.algoOverrides));
  FW_RETURN_IF_ERROR(parseCompressionRules(lookup, &c.compressionRules));
  readString(lookup, "FAIRWAY_SOCKET_IFNAME", &c.socketIfname);
  readString(lookup, "FAIRWAY_COMM_ID", &c.commId);
  readString(lookup, "FAIRWAY_JOB_SECRET", &c.jobSecret);
  readString(lookup, "FAIRWAY_JOB_SECRET_FILE", &c.jobSecretFile);
  readString(lookup, "FAIRWAY_NODE_ID", &c.nodeId);
  readString(lookup, "FAIRWAY_PLUGIN_PATH", &c.pluginPath);
  readString(lookup, "FAIRWAY_DEVICE_RUNTIME", &c.deviceRuntime);
  if (c.deviceRuntime != "cuda" && c.deviceRuntime != "none" && c.deviceRuntime != "host-emulated") {
    return Status(fwInvalidArgument, "FAIRWAY_DEVICE_RUNTIME=" + c.deviceRuntime +
                                         " is not one of cuda|none|host-emulated");
  }
  readString(lookup, "FAIRWAY_UCX_DEVICE_MEMORY", &c.ucxDeviceMemory);
  if (c.ucxDeviceMemory != "auto" && c.ucxDeviceMemory != "direct" && c.ucxDeviceMemory != "staged") {
    return Status(fwInvalidArgument, "FAIRWAY_UCX_DEVICE_MEMORY=" + c.ucxDeviceMemory +
                                         " is not one of auto|direct|staged");
  }
  readString(lookup, "FAIRWAY_STREAM_WAIT", &c.streamWait);
  if (c.streamWait != "auto" && c.streamWait != "host-function") {
    return Status(fwInvalidArgument, "FAIRWAY_STREAM_WAIT=" + c.streamWait + " is not one of auto|host-function");
  }
  readString(lookup, "FAIRWAY_TOPO_FILE", &c.topoFile);
  readString(lookup, "FAIRWAY_TOPO_DUMP_FILE", &c.topoDumpFile);
  FW_RETURN_IF_ERROR(parseList(lookup, "FAIRWAY_NET_DEVICES", &c.netDevices));
  PipelineSettings& p = c.pipeline;
  FW_RETURN_IF_ERROR(parseBytes(lookup, "FAIRWAY_SEGMENT_BYTES", 4096, size_t{1} << 30, &p.segmentBytes));
  int64_t depth = p.depth;
  FW_RETURN_IF_ERROR(parseInteger(lookup, "FAIRWAY_PIPELINE_DEPTH", 1, 64, &depth));
  p.depth = static_cast<int>(depth);
  FW_RETURN_IF_ERROR(parseInteger(lookup, "FAIRWAY_SPIN_US", 0, 10000000, &c.spinMicros));
  FW_RETURN_IF_ERROR(parseBytes(lookup, "FAIRWAY_SHM_CHUNK_BYTES", 4096, size_t{64} << 20, &c.shmChunkBytes));
  c.shmChunkBytes &= ~size_t{63};  // whole cache lines
  FW_RETURN_IF_ERROR(parseBytes(lookup, "FAIRWAY_SHM_SINGLE_COPY_BYTES", 0, size_t{1} << 40, &c.shmSingleCopyBytes));
  FW_RETURN_IF_ERROR(parseBytes(lookup, "FAIRWAY_SLICE_BYTES", 4096, size_t{1} << 40, &p.sliceBytes));
  int64_t inFlight = p.slicesInFlight;
  FW_RETURN_IF_ERROR(parseInteger(lookup, "FAIRWAY_SLICES_IN_FLIGHT", 1, 16, &inFlight));
  p.slicesInFlight = static_cast<int>(inFlight);
  FW_RETURN_IF_ERROR(parseBytes(lookup, "FAIRWAY_MIN_SHARD_BYTES", 1, size_t{1} << 40, &p.minShardBytes));
  FW_RETURN_IF_ERROR(
      parseBytes(lookup, "FAIRWAY_STAGING_SLICE_BYTES", 4096, size_t{1} << 30, &p.stagingSliceBytes));
  if (const char* text = valueOf(lookup, "FAIRWAY_INTRA_LINK")) {
    FW_RETURN_IF_ERROR(LinkModel::parse("FAIRWAY_INTRA_LINK", text, &c.intraLink));
    c.intraLinkSet = true;
  }
  if (const char* text = valueOf(lookup, "FAIRWAY_INTER_LINK")) {
    FW_RETURN_IF_ERROR(LinkModel::parse("FAIRWAY_INTER_LINK", text, &c.interLink));
    c.interLinkSet = true;
  }
  int64_t measure = 0;
  FW_RETURN_IF_ERROR(parseInteger(lookup, "FAIRWAY_MEASURE_LINKS", 0, 1, &measure));
  c.measureLinks = measure == 1;
  *out = c;
  return Status::ok();
}

}  // namespace fairway
