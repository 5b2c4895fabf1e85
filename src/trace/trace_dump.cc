#include "trace/trace_dump.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "collective/operations.h"
#include "core/datatype.h"
#include "trace/pickle.h"

namespace fairway {

namespace {

constexpr uint8_t kSend = static_cast<uint8_t>(TracedKind::Send);
constexpr uint8_t kRecv = static_cast<uint8_t>(TracedKind::Recv);

// torch's three states: a Fairway operation that failed or went to a
// device stream never completed as far as torch's analyzer is concerned.
const char* torchState(TraceState state) {
  switch (state) {
    case TraceState::Posted: return "scheduled";
    case TraceState::Completed: return "completed";
    default: return "started";
  }
}

std::string ranksText(const std::vector<int>& ranks) {
  std::string text = "[";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text + "]";
}

void writeSizes(PickleWriter& w, uint64_t elements) {
  w.beginList();
  w.beginList();
  w.integer(static_cast<int64_t>(elements));
  w.endList();
  w.endList();
}

void writeStrings(PickleWriter& w, const std::string& one) {
  w.beginList();
  w.string(one);
  w.endList();
}

void writeTimeOrNone(PickleWriter& w, uint64_t ns) {
  if (ns == 0) {
    w.none();
  } else {
    w.integer(static_cast<int64_t>(ns));
  }
}

std::string profilingName(const CommunicatorTrace& c, const TraceEntry& e) {
  std::string name = "fairway:" + torchOperationName(e.kind);
  if (e.kind == kSend) name += " " + std::to_string(c.rank) + "->" + std::to_string(e.rootOrPeer);
  if (e.kind == kRecv) {
    name += " " + std::to_string(c.rank) + "<-" + (e.rootOrPeer < 0 ? "?" : std::to_string(e.rootOrPeer));
  }
  return name;
}

void writeEntry(PickleWriter& w, const CommunicatorTrace& c, size_t pgId, const TraceEntry& e) {
  const bool p2p = !e.isCollective();
  const std::string dtype = torchDtypeName(e.datatype);
  w.beginDict();
  w.string("record_id"); w.integer(static_cast<int64_t>(e.recordId));
  w.string("pg_id"); w.integer(static_cast<int64_t>(pgId));
  w.string("process_group");
  w.beginTuple(); w.string(c.name); w.string(c.desc); w.endTuple();
  w.string("collective_seq_id"); w.integer(p2p ? 0 : static_cast<int64_t>(e.sequence));
  w.string("p2p_seq_id"); w.integer(p2p ? static_cast<int64_t>(e.sequence) : 0);
  w.string("op_id"); w.integer(static_cast<int64_t>(e.recordId));
  w.string("profiling_name"); w.string(profilingName(c, e));
  w.string("time_created_ns"); w.integer(static_cast<int64_t>(e.postedNs));
  w.string("input_sizes"); writeSizes(w, e.inElements);
  w.string("input_dtypes"); writeStrings(w, dtype);
  w.string("output_sizes"); writeSizes(w, e.outElements);
  w.string("output_dtypes"); writeStrings(w, dtype);
  w.string("state"); w.string(torchState(e.state));
  w.string("time_discovered_started_ns"); writeTimeOrNone(w, e.startedNs);
  w.string("time_discovered_completed_ns");
  writeTimeOrNone(w, e.state == TraceState::Completed ? e.endedNs : 0);
  w.string("retired"); w.boolean(e.state == TraceState::Completed || e.state == TraceState::Failed);
  w.string("timeout_ms"); w.integer(c.timeoutMs);
  w.string("is_p2p"); w.boolean(p2p);
  w.string("frames"); w.beginList(); w.endList();
  if (e.state == TraceState::Completed && e.startedNs != 0) {
    w.string("duration_ms"); w.floating(static_cast<double>(e.endedNs - e.startedNs) / 1e6);
  }
  // Fairway's own: what torch's fields cannot say.
  w.string("fairway_op"); w.string(tracedKindName(e.kind));
  w.string("fairway_state"); w.string(traceStateName(e.state));
  w.string("fairway_count"); w.integer(static_cast<int64_t>(e.count));
  w.string("fairway_caller_seq"); w.integer(static_cast<int64_t>(e.callerSequence));
  w.string("fairway_datatype"); w.string(datatypeName(static_cast<fwDataType_t>(e.datatype)));
  w.string("fairway_red_op"); w.string(opName(static_cast<fwRedOp_t>(e.op)));
  w.string("fairway_root_or_peer"); w.integer(e.rootOrPeer);
  w.string("fairway_memory"); w.string(e.memory ? "device" : "host");
  w.string("fairway_stream"); w.integer(static_cast<int64_t>(e.stream));
  auto algorithm = c.algorithmNames.find(e.recordId);
  auto provider = c.providerNames.find(e.recordId);
  w.string("fairway_algorithm"); w.string(algorithm != c.algorithmNames.end() ? algorithm->second : "");
  w.string("fairway_provider"); w.string(provider != c.providerNames.end() ? provider->second : "");
  w.string("fairway_ended_ns"); writeTimeOrNone(w, e.endedNs);
  w.string("fairway_result"); w.integer(e.result);
  auto failure = c.failures.find(e.recordId);
  w.string("fairway_error"); w.string(failure != c.failures.end() ? failure->second : "");
  w.endDict();
}

void writeIntList(PickleWriter& w, const std::vector<int>& values) {
  w.beginList();
  for (int v : values) w.integer(v);
  w.endList();
}

// pg_status: the last collective numbers enqueued, started and completed.
void writeStatus(PickleWriter& w, const CommunicatorTrace& c) {
  int64_t enqueued = -1, started = -1, completed = -1;
  for (const TraceEntry& e : c.entries) {
    if (!e.isCollective()) continue;
    enqueued = std::max<int64_t>(enqueued, static_cast<int64_t>(e.sequence));
    if (e.state != TraceState::Posted) started = std::max<int64_t>(started, static_cast<int64_t>(e.sequence));
    if (e.state == TraceState::Completed) completed = std::max<int64_t>(completed, static_cast<int64_t>(e.sequence));
  }
  w.beginDict();
  w.string("last_enqueued_collective"); w.integer(enqueued);
  w.string("last_started_collective"); w.integer(started);
  w.string("last_completed_collective"); w.integer(completed);
  w.endDict();
}

// A dump's kind may be anything a file held: only known collectives have a row.
bool rooted(uint8_t kind) { return kind < kCollectiveKinds && operationRow(static_cast<CollectiveKind>(kind)).rooted; }
bool reduces(uint8_t kind) { return kind < kCollectiveKinds && operationRow(static_cast<CollectiveKind>(kind)).reduces; }

}  // namespace

std::string describeCall(const TraceEntry& e) {
  std::string text = tracedKindName(e.kind);
  if (!e.isCollective()) {
    const bool send = e.kind == static_cast<uint8_t>(TracedKind::Send);
    return text + " (count " + std::to_string(e.count) + ", " + datatypeName(static_cast<fwDataType_t>(e.datatype)) +
           (send ? ", to rank " : ", from ") + (e.rootOrPeer < 0 ? "any rank" : (send ? "" : "rank ") +
           std::to_string(e.rootOrPeer)) + ")";
  }
  if (static_cast<CollectiveKind>(e.kind) == CollectiveKind::Barrier) return text;
  text += " (count " + std::to_string(e.count) + ", " + datatypeName(static_cast<fwDataType_t>(e.datatype));
  if (reduces(e.kind)) text += std::string(", ") + opName(static_cast<fwRedOp_t>(e.op));
  if (rooted(e.kind)) text += ", root " + std::to_string(e.rootOrPeer);
  return text + ")";
}

std::string traceTimeText(uint64_t ns) {
  if (ns == 0) return "?";
  const time_t seconds = static_cast<time_t>(ns / 1000000000u);
  tm parts{};
  gmtime_r(&seconds, &parts);
  char text[48];
  std::snprintf(text, sizeof(text), "%02d:%02d:%02d.%03u UTC", parts.tm_hour, parts.tm_min, parts.tm_sec,
                static_cast<unsigned>(ns % 1000000000u / 1000000u));
  return text;
}

std::string torchOperationName(uint8_t kind) {
  if (kind == kSend) return "send";
  if (kind == kRecv) return "recv";
  switch (static_cast<CollectiveKind>(kind)) {
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::Broadcast: return "broadcast";
    case CollectiveKind::Reduce: return "reduce";
    case CollectiveKind::AllToAll: return "all_to_all";
    case CollectiveKind::AllToAllv: return "all_to_all_v_single";
    case CollectiveKind::Gather: return "gather";
    case CollectiveKind::Scatter: return "scatter";
    case CollectiveKind::Barrier: return "barrier";
  }
  return "unknown";
}

std::string torchDtypeName(uint8_t datatype) {
  switch (static_cast<fwDataType_t>(datatype)) {
    case fwInt8: return "Char";
    case fwUint8: return "Byte";
    case fwInt32: return "Int";
    case fwUint32: return "UInt32";
    case fwInt64: return "Long";
    case fwUint64: return "UInt64";
    case fwFloat16: return "Half";
    case fwFloat32: return "Float";
    case fwFloat64: return "Double";
    case fwBfloat16: return "BFloat16";
    case fwFloat8e4m3: return "Float8_e4m3fn";
    case fwFloat8e5m2: return "Float8_e5m2";
    default: return datatypeName(static_cast<fwDataType_t>(datatype));
  }
}

std::string encodeTraceDump(const TraceDump& dump) {
  PickleWriter w;
  w.beginDict();
  w.string("version"); w.string(kTraceFormatVersion);
  w.string("comm_lib_version"); w.string(dump.library);
  w.string("pg_config");
  w.beginDict();
  for (const CommunicatorTrace& c : dump.communicators) {
    w.string(c.name);
    w.beginDict();
    w.string("name"); w.string(c.name);
    w.string("desc"); w.string(c.desc);
    w.string("ranks"); w.string(ranksText(c.globalRanks));
    w.endDict();
  }
  w.endDict();
  w.string("pg_status");
  w.beginDict();
  for (size_t i = 0; i < dump.communicators.size(); ++i) {
    w.string(std::to_string(i));
    writeStatus(w, dump.communicators[i]);
  }
  w.endDict();
  w.string("entries");
  w.beginList();
  for (size_t i = 0; i < dump.communicators.size(); ++i) {
    for (const TraceEntry& e : dump.communicators[i].entries) writeEntry(w, dump.communicators[i], i, e);
  }
  w.endList();
  w.string("fairway");
  w.beginDict();
  w.string("format"); w.integer(kFairwayTraceFormat);
  w.string("rank"); w.integer(dump.rank);
  w.string("pid"); w.integer(dump.pid);
  w.string("host"); w.string(dump.host);
  w.string("reason"); w.string(dump.reason);
  w.string("time_ns"); w.integer(static_cast<int64_t>(dump.timeNs));
  w.string("communicators");
  w.beginList();
  for (const CommunicatorTrace& c : dump.communicators) {
    w.beginDict();
    w.string("name"); w.string(c.name);
    w.string("rank"); w.integer(c.rank);
    w.string("size"); w.integer(c.size);
    w.string("global_ranks"); writeIntList(w, c.globalRanks);
    w.string("timeout_ms"); w.integer(c.timeoutMs);
    w.string("broken"); w.string(c.broken);
    w.string("failed_ranks"); writeIntList(w, c.failedRanks);
    w.string("posted"); w.integer(static_cast<int64_t>(c.posted));
    w.string("waiting_on"); w.integer(c.waitingOn);
    w.string("waiting_since_ns"); w.integer(static_cast<int64_t>(c.waitingSinceNs));
    w.endDict();
  }
  w.endList();
  w.endDict();
  w.endDict();
  return w.finish();
}

namespace {

Status missing(const std::string& what) {
  return Status(fwInvalidArgument, "not a Fairway trace dump: " + what);
}

const PickleValue* need(const PickleValue& dict, const std::string& key, PickleValue::Type type,
                        const std::string& where, Status* st) {
  const PickleValue* v = dict.get(key);
  if (v == nullptr || v->type != type) {
    if (st->isOk()) *st = missing(where + " has no " + key + " of the right type");
    return nullptr;
  }
  return v;
}

std::vector<int> intList(const PickleValue* list) {
  std::vector<int> out;
  if (list == nullptr) return out;
  for (const auto& item : list->items) out.push_back(static_cast<int>(item->intOr(-1)));
  return out;
}

uint8_t kindFromName(const std::string& name) {
  if (name == "send") return kSend;
  if (name == "recv") return kRecv;
  for (int k = 0; k < kCollectiveKinds; ++k) {
    if (name == collectiveName(static_cast<CollectiveKind>(k))) return static_cast<uint8_t>(k);
  }
  return 255;
}

TraceState stateFromName(const std::string& name) {
  for (TraceState s : {TraceState::Posted, TraceState::Enqueued, TraceState::Started, TraceState::Completed,
                       TraceState::Failed}) {
    if (name == traceStateName(s)) return s;
  }
  return TraceState::Posted;
}

uint8_t datatypeFromName(const std::string& name) {
  for (int t = 0; t < 32; ++t) {
    if (name == datatypeName(static_cast<fwDataType_t>(t))) return static_cast<uint8_t>(t);
  }
  return 255;
}

uint8_t opFromName(const std::string& name) {
  for (int o = 0; o < 16; ++o) {
    if (name == opName(static_cast<fwRedOp_t>(o))) return static_cast<uint8_t>(o);
  }
  return 255;
}

uint64_t timeOf(const PickleValue* v) {
  return v == nullptr || v->type != PickleValue::Type::Int ? 0 : static_cast<uint64_t>(v->integer);
}

Status decodeEntry(const PickleValue& e, TraceDump* out) {
  if (e.type != PickleValue::Type::Dict) return missing("an entry is not a dictionary");
  Status st;
  const PickleValue* pgId = need(e, "pg_id", PickleValue::Type::Int, "an entry", &st);
  const PickleValue* op = need(e, "fairway_op", PickleValue::Type::String, "an entry", &st);
  FW_RETURN_IF_ERROR(st);
  if (pgId->integer < 0 || static_cast<size_t>(pgId->integer) >= out->communicators.size()) {
    return missing("an entry's pg_id " + std::to_string(pgId->integer) + " names no communicator");
  }
  CommunicatorTrace& c = out->communicators[static_cast<size_t>(pgId->integer)];
  TraceEntry t;
  t.recordId = static_cast<uint64_t>(e.intAt("record_id", 0));
  t.kind = kindFromName(op->text);
  if (t.kind == 255) return missing("an entry's operation \"" + op->text + "\" is unknown");
  const bool p2p = !t.isCollective();
  const PickleValue* seq = e.get(p2p ? "p2p_seq_id" : "collective_seq_id");
  t.sequence = seq ? static_cast<uint64_t>(seq->intOr(0)) : 0;
  t.state = stateFromName(e.textAt("fairway_state"));
  t.datatype = datatypeFromName(e.textAt("fairway_datatype"));
  t.op = opFromName(e.textAt("fairway_red_op"));
  t.count = static_cast<uint64_t>(e.intAt("fairway_count", 0));
  t.callerSequence = static_cast<uint64_t>(e.intAt("fairway_caller_seq", 0));
  t.rootOrPeer = static_cast<int32_t>(e.intAt("fairway_root_or_peer", -1));
  t.memory = e.textAt("fairway_memory") == "device" ? 1 : 0;
  t.stream = static_cast<uint64_t>(e.intAt("fairway_stream", 0));
  t.result = static_cast<int32_t>(e.intAt("fairway_result", 0));
  t.postedNs = timeOf(e.get("time_created_ns"));
  t.startedNs = timeOf(e.get("time_discovered_started_ns"));
  t.endedNs = timeOf(e.get("fairway_ended_ns"));
  const PickleValue* in = e.get("input_sizes");
  if (in && !in->items.empty() && !in->items[0]->items.empty()) t.inElements = in->items[0]->items[0]->intOr(0);
  const PickleValue* outSizes = e.get("output_sizes");
  if (outSizes && !outSizes->items.empty() && !outSizes->items[0]->items.empty()) {
    t.outElements = outSizes->items[0]->items[0]->intOr(0);
  }
  for (auto [key, names] : {std::make_pair("fairway_algorithm", &c.algorithmNames),
                             std::make_pair("fairway_provider", &c.providerNames),
                             std::make_pair("fairway_error", &c.failures)}) {
    std::string value = e.textAt(key);
    if (!value.empty()) (*names)[t.recordId] = std::move(value);
  }
  c.entries.push_back(t);
  return Status::ok();
}

}  // namespace

Status decodeTraceDump(const std::string& bytes, TraceDump* out) {
  std::shared_ptr<PickleValue> root;
  FW_RETURN_IF_ERROR(parsePickle(bytes, &root));
  if (root->type != PickleValue::Type::Dict) return missing("the top level is not a dictionary");
  Status st;
  const PickleValue* version = need(*root, "version", PickleValue::Type::String, "the dump", &st);
  const PickleValue* fairway = need(*root, "fairway", PickleValue::Type::Dict, "the dump", &st);
  const PickleValue* entries = need(*root, "entries", PickleValue::Type::List, "the dump", &st);
  FW_RETURN_IF_ERROR(st.withContext("(torch's own dumps and other formats are not read)"));
  if (version->text != kTraceFormatVersion) {
    return missing("format version " + version->text + " (this build reads " + kTraceFormatVersion + ")");
  }
  const PickleValue* format = need(*fairway, "format", PickleValue::Type::Int, "the fairway keys", &st);
  const PickleValue* comms = need(*fairway, "communicators", PickleValue::Type::List, "the fairway keys", &st);
  FW_RETURN_IF_ERROR(st);
  if (format->integer != kFairwayTraceFormat) {
    return missing("Fairway format " + std::to_string(format->integer) + " (this build reads " +
                   std::to_string(kFairwayTraceFormat) + ")");
  }
  *out = TraceDump();
  out->rank = static_cast<int>(fairway->intAt("rank", -1));
  out->pid = static_cast<int>(fairway->intAt("pid", 0));
  out->host = fairway->textAt("host");
  out->reason = fairway->textAt("reason");
  out->timeNs = static_cast<uint64_t>(fairway->intAt("time_ns", 0));
  const PickleValue* library = root->get("comm_lib_version");
  out->library = library ? library->textOr("") : "";
  const PickleValue* pgConfig = root->get("pg_config");
  for (const auto& item : comms->items) {
    if (item->type != PickleValue::Type::Dict) return missing("a communicator is not a dictionary");
    CommunicatorTrace c;
    c.name = item->textAt("name");
    c.rank = static_cast<int>(item->intAt("rank", -1));
    c.size = static_cast<int>(item->intAt("size", 0));
    c.timeoutMs = item->intAt("timeout_ms", 0);
    c.broken = item->textAt("broken");
    c.posted = static_cast<uint64_t>(item->intAt("posted", 0));
    c.waitingOn = static_cast<int>(item->intAt("waiting_on", -1));
    c.waitingSinceNs = static_cast<uint64_t>(item->intAt("waiting_since_ns", 0));
    c.globalRanks = intList(item->get("global_ranks"));
    c.failedRanks = intList(item->get("failed_ranks"));
    if (c.size > kMostTracedRanks) {
      return missing("communicator \"" + c.name + "\" has " + std::to_string(c.size) + " ranks (more than " +
                     std::to_string(kMostTracedRanks) + ")");
    }
    if (c.size <= 0 || c.rank < 0 || c.rank >= c.size) {
      return missing("communicator \"" + c.name + "\" has rank " + std::to_string(c.rank) + " of " +
                     std::to_string(c.size));
    }
    const PickleValue* config = pgConfig ? pgConfig->get(c.name) : nullptr;
    c.desc = config ? config->textAt("desc") : "";
    out->communicators.push_back(std::move(c));
  }
  for (const auto& e : entries->items) FW_RETURN_IF_ERROR(decodeEntry(*e, out));
  return Status::ok();
}

std::string traceDumpFileName(int rank, int pid) {
  return "pid" + std::to_string(pid) + ".fairway_rank" + std::to_string(rank);
}

Status writeTraceDump(const std::string& dir, const TraceDump& dump, std::string* path) {
  const std::string bytes = encodeTraceDump(dump);
  const std::string final = dir + "/" + traceDumpFileName(dump.rank, dump.pid);
  // Hidden, and without the analyzers' prefix, so neither reads a half-written file.
  const std::string partial = dir + "/.fairway-trace-writing-" + std::to_string(dump.pid);
  const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status(fwSystemError, "cannot write a trace dump in " + dir + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(partial.c_str());
      return Status(fwSystemError, "writing the trace dump " + partial + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 || ::rename(partial.c_str(), final.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(partial.c_str());
    return Status(fwSystemError, "finishing the trace dump " + final + ": " + why);
  }
  if (path != nullptr) *path = final;
  return Status::ok();
}

}  // namespace fairway
