#include "core/config_variables.h"

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/config_parse.h"
#include "core/environment.h"
#include "core/strings.h"

namespace fairway {
namespace {

// How one Config variable reads and shows: apply gets the variable's name
// for its error message.
struct Handler {
  std::function<Status(const std::string& name, const char* text, Config* config)> apply;
  std::function<std::string(const Config& config)> show;
};

ConfigVariable configVariable(const char* name, const char* defaultText, const char* meaning, Handler handler) {
  auto apply = [name, parse = std::move(handler.apply)](const char* text, Config* config) {
    return parse(name, text, config);
  };
  return {name, defaultText, meaning, VariableReader::Config, std::move(apply), std::move(handler.show)};
}

// A variable read outside Config (the logger's, the launcher's): listed so
// the table, fairway-info and the documentation know every name.
ConfigVariable readBy(VariableReader reader, const char* name, const char* defaultText, const char* meaning) {
  return {name, defaultText, meaning, reader, nullptr, nullptr};
}

// Each factory takes a field: a generic lambda returning the Config member
// it sets, so one accessor serves both the writer and the const reader.

template <typename Field>
Handler integer(int64_t minValue, int64_t maxValue, Field field) {
  using Value = std::remove_reference_t<decltype(field(std::declval<Config&>()))>;
  return {[=](const std::string& name, const char* text, Config* c) {
            int64_t value = 0;
            FW_RETURN_IF_ERROR(parseIntegerText(name, text, minValue, maxValue, &value));
            field(*c) = static_cast<Value>(value);
            return Status::ok();
          },
          [=](const Config& c) { return std::to_string(field(c)); }};
}

template <typename Field>
Handler bytes(size_t minValue, size_t maxValue, Field field) {
  return {[=](const std::string& name, const char* text, Config* c) {
            return parseByteText(name, text, minValue, maxValue, &field(*c));
          },
          [=](const Config& c) { return byteText(field(c)); }};
}

template <typename Field>
Handler text(Field field) {
  return {[=](const std::string&, const char* value, Config* c) {
            field(*c) = value;
            return Status::ok();
          },
          [=](const Config& c) { return field(c); }};
}

// The secret itself is never shown.
template <typename Field>
Handler secret(Field field) {
  Handler handler = text(field);
  handler.show = [=](const Config& c) { return field(c).empty() ? std::string() : std::string("(set)"); };
  return handler;
}

template <typename Field>
Handler choice(std::vector<std::string> choices, Field field) {
  return {[=](const std::string& name, const char* text, Config* c) {
            return parseChoice(name, text, choices, &field(*c));
          },
          [=](const Config& c) { return field(c); }};
}

// 0 or 1.
template <typename Field>
Handler flag(Field field) {
  return {[=](const std::string& name, const char* text, Config* c) {
            int64_t value = 0;
            FW_RETURN_IF_ERROR(parseIntegerText(name, text, 0, 1, &value));
            field(*c) = value == 1;
            return Status::ok();
          },
          [=](const Config& c) { return std::string(field(c) ? "1" : "0"); }};
}

// "alpha_us,GBps"; a link given here is kept when links are measured.
template <typename Field, typename SetFlag>
Handler link(Field field, SetFlag given) {
  return {[=](const std::string& name, const char* text, Config* c) {
            FW_RETURN_IF_ERROR(LinkModel::parse(name, text, &field(*c)));
            given(*c) = true;
            return Status::ok();
          },
          [=](const Config& c) { return linkText(field(c)); }};
}

// Whole cache lines: a chunk is rounded down to a multiple of 64 bytes.
// "auto" leaves the choice to the node's leader (SharedMemoryNode::defaultChunkBytes).
Handler sharedMemoryChunk() {
  Handler handler = bytes(4096, size_t{64} << 20, [](auto& c) -> auto& { return c.shmChunkBytes; });
  auto parse = std::move(handler.apply);
  auto show = std::move(handler.show);
  handler.apply = [parse](const std::string& name, const char* text, Config* c) {
    if (std::string(text) == "auto") {
      c->shmChunkBytes = kShmChunkBytesPerCpu;
      c->shmChunkBytesSet = false;
      return Status::ok();
    }
    FW_RETURN_IF_ERROR(parse(name, text, c));
    c->shmChunkBytes &= ~size_t{63};
    c->shmChunkBytesSet = true;
    return Status::ok();
  };
  handler.show = [show](const Config& c) { return c.shmChunkBytesSet ? show(c) : std::string("auto"); };
  return handler;
}

// "auto" (kept as 0, which no byte count given can be) leaves it to the
// node (SharedMemoryNode::defaultStreamingNodeBytes).
Handler sharedMemoryStreaming() {
  Handler handler = bytes(1, kNoUpperEnd, [](auto& c) -> auto& { return c.shmStreamBytes; });
  auto parse = std::move(handler.apply);
  auto show = std::move(handler.show);
  handler.apply = [parse](const std::string& name, const char* text, Config* c) {
    if (std::string(text) != "auto") return parse(name, text, c);
    c->shmStreamBytes = 0;
    return Status::ok();
  };
  handler.show = [show](const Config& c) { return c.shmStreamBytes != 0 ? show(c) : std::string("auto"); };
  return handler;
}

// "auto", "0" (never), "MIN" (and larger) or "MIN-MAX", in bytes.
Handler singleCopyWindow() {
  return {[](const std::string& name, const char* text, Config* c) {
            const std::string value = text;
            c->shmSingleCopySet = value != "auto";
            c->shmSingleCopyMin = c->shmSingleCopyMax = 0;
            if (!c->shmSingleCopySet) return Status::ok();
            const size_t dash = value.find('-');
            const size_t most = kNoUpperEnd;
            FW_RETURN_IF_ERROR(parseByteText(name, value.substr(0, dash).c_str(), 0, most, &c->shmSingleCopyMin));
            c->shmSingleCopyMax = most;
            if (dash != std::string::npos) {
              FW_RETURN_IF_ERROR(parseByteText(name, value.substr(dash + 1).c_str(), 1, most, &c->shmSingleCopyMax));
              if (c->shmSingleCopyMax < c->shmSingleCopyMin) {
                return Status(fwInvalidArgument, name + "=" + value + ": the window's end is below its start");
              }
            }
            return Status::ok();
          },
          [](const Config& c) {
            if (!c.shmSingleCopySet) return std::string("auto");
            if (c.shmSingleCopyMin == 0) return std::string("0");
            return byteText(c.shmSingleCopyMin) +
                   (c.shmSingleCopyMax >= kNoUpperEnd ? std::string() : "-" + byteText(c.shmSingleCopyMax));
          }};
}

Handler netDevices() {
  return {[](const std::string& name, const char* text, Config* c) {
            c->netDevices = splitString(text, ',');
            if (c->netDevices.empty()) return Status(fwInvalidArgument, name + "=" + text + " names no device");
            return Status::ok();
          },
          [](const Config& c) {
            std::string text;
            for (const std::string& device : c.netDevices) text += (text.empty() ? "" : ",") + device;
            return text;
          }};
}

Handler algorithms() {
  return {[](const std::string&, const char* text, Config* c) { return parseAlgoOverrides(text, &c->algoOverrides); },
          [](const Config& c) {
            std::string text;
            for (const AlgoOverride& o : c.algoOverrides) text += (text.empty() ? "" : ",") + o.text();
            return text;
          }};
}

Handler compressionRules() {
  return {[](const std::string&, const char* text, Config* c) {
            return parseCompressionRules(text, &c->compressionRules);
          },
          [](const Config& c) {
            std::string text;
            for (const auto& [collective, rule] : c.compressionRules) {
              text += (text.empty() ? "" : ";") + collective + ":" + compressionName(rule.compression.kind);
              if (rule.compression.blockwise()) text += "/" + std::to_string(rule.compression.blockSize);
              if (rule.minBytes > 0) text += ":" + byteText(rule.minBytes);
            }
            return text;
          }};
}

// One row of the documented table names all four.
constexpr const char* kLauncherMeaning =
    "rank, size, rank within the node and ranks on the node, set by fairwayrun (other launchers' own variables "
    "are read too: torchrun's, Open MPI's, Slurm's)";

std::vector<ConfigVariable> makeTable() {
  return {
    configVariable("FAIRWAY_TIMEOUT_MS", "300000",
        "longest wait for a peer before a call fails with `fwTimeout` naming it",
        integer(1, int64_t{1} << 40, [](auto& c) -> auto& { return c.timeoutMs; })),
    configVariable("FAIRWAY_TRACE_ENTRIES", "2000",
        "operations each communicator's flight record keeps (the last ones); 0 turns the record off "
        "(docs/debugging.md)",
        integer(0, 1 << 24, [](auto& c) -> auto& { return c.traceEntries; })),
    configVariable("FAIRWAY_TRACE_DIR", "",
        "directory for trace dumps: set, every rank writes its records there when a call times out or "
        "fails, on a revoke or abort, and on `FAIRWAY_TRACE_SIGNAL`; read them with `fairway-trace DIR`",
        text([](auto& c) -> auto& { return c.traceDir; })),
    configVariable("FAIRWAY_TRACE_SIGNAL", "USR1",
        "the signal that makes a process with `FAIRWAY_TRACE_DIR` set write its dump: `USR1`, `USR2` or "
        "`none`",
        choice({"USR1", "USR2", "none"}, [](auto& c) -> auto& { return c.traceSignal; })),
    configVariable("FAIRWAY_TRANSPORT", "auto",
        "transport for device buffers at every level: `auto`, `ucx` or `nccl`",
        choice({"auto", "ucx", "nccl"}, [](auto& c) -> auto& { return c.transport; })),
    configVariable("FAIRWAY_INTRA_TRANSPORT", "auto",
        "the same inside a node; wins over `FAIRWAY_TRANSPORT`; `ucx` (here or in `FAIRWAY_TRANSPORT` "
        "alone) also keeps host collectives off the node's shared-memory segment",
        choice({"auto", "ucx", "nccl"}, [](auto& c) -> auto& { return c.intraTransport; })),
    configVariable("FAIRWAY_SHM_CHUNK_BYTES", "auto",
        "each local rank's share of one round in the node's shared-memory segment (4K to 64M); `auto`: "
        "rounds of about 2M in all (each rank's share 256K to 1M: few hand-overs, a round still in the "
        "caches), or with more ranks on the host than CPUs about 16M in all (each rank's share 256K to 4M: "
        "every hand-over between ranks then waits for the scheduler); the segment holds four per rank (two "
        "rounds in flight): 6.3 MB for 2 ranks at 1M, 42 MB for 4 at 4M",
        sharedMemoryChunk()),
    configVariable("FAIRWAY_SHM_SINGLE_COPY_BYTES", "auto",
        "allgather and all-to-all blocks, broadcasts, allreduces and reduce-scatters (the whole input) whose "
        "size lies in this window read the owners' buffers in place (`process_vm_readv`) instead of passing "
        "through the segment: `MIN-MAX` or `MIN` (no upper end), in bytes; 0: never; `auto`: 2 ranks with a "
        "CPU each read allgather blocks of 8K-16M, all-to-all blocks of 16K-16M and broadcasts of 32K-32M on "
        "Intel CPUs (on others 256K-2M, 512K-2M and 2M-3M where the ranks' cores measure near at creation, a "
        "cache line's round trip under 300 ns, else 16K-4M, 16K-4M and 16K-16M), allreduces of 2M-8M (2M-3M "
        "between near cores on CPUs other than Intel's) and, between far cores on CPUs other than Intel's, "
        "reduce-scatters of 32K-16M in place, and more "
        "ranks than CPUs all-to-all blocks from 64K on Intel CPUs (128K on others; 32K from 8 ranks), "
        "reduce-scatters from 1M (4M past 4 ranks) and, on 3 or 4 ranks, allreduces' inputs from 4M, where "
        "that measured faster than two copies; two copies "
        "serve the rest (docs/design/shared_memory.md, \"Single copies\")",
        singleCopyWindow()),
    configVariable("FAIRWAY_SHM_STREAM_BYTES", "auto",
        "the node's outputs together (a collective's output times its ranks on the node), in bytes, from "
        "which the shared-memory collectives write their results with streaming stores, past the caches; "
        "`auto`: the last-level cache of the rank's CPU as sysfs describes it (32M where it says nothing)",
        sharedMemoryStreaming()),
    configVariable("FAIRWAY_INTER_TRANSPORT", "auto",
        "the same between nodes; wins over `FAIRWAY_TRANSPORT`",
        choice({"auto", "ucx", "nccl"}, [](auto& c) -> auto& { return c.interTransport; })),
    configVariable("FAIRWAY_TOPO_FILE", "",
        "hwloc XML to use instead of discovering this machine",
        text([](auto& c) -> auto& { return c.topoFile; })),
    configVariable("FAIRWAY_TOPO_DUMP_FILE", "",
        "write the topology found (or read) here as hwloc XML",
        text([](auto& c) -> auto& { return c.topoDumpFile; })),
    configVariable("FAIRWAY_NET_DEVICES", "nearest RDMA NIC to the rank's GPU",
        "UCX network devices for inter-node traffic, comma list: local rank i takes entry i mod n "
        "(e.g. `mlx5_0:1,mlx5_1:1`)",
        netDevices()),
    configVariable("FAIRWAY_ALGO", "",
        "per-collective algorithm: items `collective[:FROM-TO][:ranks=LO-HI]:algorithm` separated by `,` "
        "or `;`, the first that applies wins, e.g. "
        "`allreduce:0-64K:recursive_doubling,allreduce:64K-:ring;allgather:ranks=2-4:bruck` (sizes as "
        "selection counts them, from FROM up to but not including TO, K/M/G allowed, either end left "
        "out; rank counts inclusive; names in docs/design/algorithms.md); on device buffers a forced algorithm runs "
        "over UCX instead of NCCL's own collective (forced `twophase` keeps NCCL inside nodes)",
        algorithms()),
    configVariable("FAIRWAY_COMPRESS", "",
        "opt-in compression of plain calls for unmodified programs (numerics change): "
        "`collective:kind[/block][:minbytes]` items, e.g. "
        "`allreduce:int8:1M;reducescatter:int4/128;allgather:bf16`; applies to host buffers of float, "
        "half or bfloat16 data (reductions: sum and avg) at least `minbytes` large (the whole input), "
        "logged at INFO on rank 0",
        compressionRules()),
    configVariable("FAIRWAY_SLICE_BYTES", "1M",
        "two-phase pipeline slice, in bytes of the whole buffer (reduce-scatter on consecutive nodes: "
        "M times that); at least 2 x slices in flight per call where the shard floor allows (byte "
        "sizes take K, M, G)",
        bytes(4096, size_t{1} << 40, [](auto& c) -> auto& { return c.pipeline.sliceBytes; })),
    configVariable("FAIRWAY_SLICES_IN_FLIGHT", "8",
        "two-phase slices in the pipeline at once (1: no overlap)",
        integer(1, 16, [](auto& c) -> auto& { return c.pipeline.slicesInFlight; })),
    configVariable("FAIRWAY_MIN_SHARD_BYTES", "64K",
        "smallest piece of a slice one rank sends: caps the slice count",
        bytes(1, size_t{1} << 40, [](auto& c) -> auto& { return c.pipeline.minShardBytes; })),
    configVariable("FAIRWAY_RAIL_PEERS_IN_FLIGHT", "256",
        "two-phase rail exchange: nodes a rank sends to and receives from at once; more take "
        "rounds, each waited for before the next (bounds requests and incast on thousands of nodes)",
        integer(1, 1 << 20, [](auto& c) -> auto& { return c.pipeline.railPeersInFlight; })),
    configVariable("FAIRWAY_INTRA_LINK", "1,5",
        "cost model: latency (us) and bandwidth (GB/s) inside a node",
        link([](auto& c) -> auto& { return c.intraLink; }, [](auto& c) -> auto& { return c.intraLinkSet; })),
    configVariable("FAIRWAY_INTER_LINK", "10,1.25",
        "cost model: the same for a node's network link",
        link([](auto& c) -> auto& { return c.interLink; }, [](auto& c) -> auto& { return c.interLinkSet; })),
    configVariable("FAIRWAY_MEASURE_LINKS", "0",
        "1: measure both links when a communicator spanning nodes is created (ping-pong, a few MiB "
        "per link; a link given by its variable above is kept) and log them at INFO",
        flag([](auto& c) -> auto& { return c.measureLinks; })),
    configVariable("FAIRWAY_SEGMENT_BYTES", "256K",
        "pipeline segment of ring and tree algorithms",
        bytes(4096, size_t{1} << 30, [](auto& c) -> auto& { return c.pipeline.segmentBytes; })),
    configVariable("FAIRWAY_PIPELINE_DEPTH", "4",
        "segments in flight per peer",
        integer(1, 64, [](auto& c) -> auto& { return c.pipeline.depth; })),
    configVariable("FAIRWAY_STAGING_SLICE_BYTES", "4M",
        "messages (fwSend, fwRecv) of device buffers staged through pinned host memory move in slices "
        "of this many bytes (two in flight: one copied while the other crosses the network)",
        bytes(4096, size_t{1} << 30, [](auto& c) -> auto& { return c.pipeline.stagingSliceBytes; })),
    configVariable("FAIRWAY_SPIN_US", "2000",
        "the most a wait for a peer busy-polls before it sleeps (on the transports' event fds, or a futex "
        "in the node's shared memory); 0: sleep at once",
        integer(0, 10000000, [](auto& c) -> auto& { return c.spinMicros; })),
    configVariable("FAIRWAY_WAIT", "adaptive",
        "how waits spend the cores: `adaptive` (spin only while the wait is likely to end soon, four "
        "times the communicator's typical wait, and give the core back at once when the scheduler shows "
        "another thread or process wants it; with more ranks than CPUs, waits yield for FAIRWAY_SPIN_US), "
        "`spin` (every wait spins for FAIRWAY_SPIN_US before sleeping: for ranks that each own a core)",
        choice({"adaptive", "spin"}, [](auto& c) -> auto& { return c.waitPolicy; })),
    configVariable("FAIRWAY_COMM_ID", "",
        "host:port of the bootstrap root for launcher-started jobs",
        text([](auto& c) -> auto& { return c.commId; })),
    configVariable("FAIRWAY_JOB_SECRET", "",
        "job secret for launcher-started jobs, the same on every rank (see docs/usage.md, \"Security\")",
        secret([](auto& c) -> auto& { return c.jobSecret; })),
    configVariable("FAIRWAY_JOB_SECRET_FILE", "",
        "file holding the job secret (a shared filesystem's), readable by its owner only (mode 600); "
        "a trailing newline is ignored",
        text([](auto& c) -> auto& { return c.jobSecretFile; })),
    readBy(VariableReader::Launcher, "FAIRWAY_RANK", "", kLauncherMeaning),
    readBy(VariableReader::Launcher, "FAIRWAY_WORLD_SIZE", "", kLauncherMeaning),
    readBy(VariableReader::Launcher, "FAIRWAY_LOCAL_RANK", "", kLauncherMeaning),
    readBy(VariableReader::Launcher, "FAIRWAY_LOCAL_SIZE", "", kLauncherMeaning),
    configVariable("FAIRWAY_SOCKET_IFNAME", "first up interface",
        "interface the bootstrap root of `fwGetUniqueId` listens on; under a launcher, where rank 0's "
        "root listens when `FAIRWAY_COMM_ID`/`MASTER_ADDR` is not an address of its host",
        text([](auto& c) -> auto& { return c.socketIfname; })),
    configVariable("FAIRWAY_NODE_ID", "host name",
        "node identity of this rank (one machine posing as several nodes)",
        text([](auto& c) -> auto& { return c.nodeId; })),
    configVariable("FAIRWAY_PLUGIN_PATH", "beside libfairway.so",
        "directory of the plugins (UCX, NCCL, CUDA runtime)",
        text([](auto& c) -> auto& { return c.pluginPath; })),
    configVariable("FAIRWAY_UCX_DEVICE_MEMORY", "auto",
        "how device buffers cross UCX: `auto` (directly where UCX on every rank reports CUDA memory "
        "support, else staged), `direct` (fails communicator creation where UCX cannot), `staged` "
        "(always through pinned host memory)",
        choice({"auto", "direct", "staged"}, [](auto& c) -> auto& { return c.ucxDeviceMemory; })),
    configVariable("FAIRWAY_STREAM_WAIT", "auto",
        "how a stream waits for a device call that the worker thread runs: `auto` "
        "(`cuStreamWaitValue32`, the GPU polls a flag, where the driver has stream memory operations, "
        "else a host function), `host-function` (always `cudaLaunchHostFunc`, which holds CUDA's "
        "callback thread: for measuring the two against each other)",
        choice({"auto", "host-function"}, [](auto& c) -> auto& { return c.streamWait; })),
    configVariable("FAIRWAY_DEVICE_RUNTIME", "cuda",
        "`cuda`; `none` (every buffer is host memory, CUDA never loaded); `host-emulated`: the test "
        "runtime of Fairway's build tree (see docs/testing.md)",
        choice({"cuda", "none", "host-emulated"}, [](auto& c) -> auto& { return c.deviceRuntime; })),
    readBy(VariableReader::Logger, "FAIRWAY_DEBUG", "WARN",
        "log level: NONE, WARN, INFO, TRACE"),
    readBy(VariableReader::Logger, "FAIRWAY_DEBUG_SUBSYS", "ALL",
        "comma list: INIT, BOOTSTRAP, TRANSPORT, COLL, ALGO, API"),
    readBy(VariableReader::Logger, "FAIRWAY_DEBUG_FILE", "stderr",
        "log file; `%h` is the host, `%p` the pid")
  };
}

}  // namespace

const std::vector<ConfigVariable>& configVariables() {
  static const std::vector<ConfigVariable> table = makeTable();
  return table;
}

// Config reads itself through the table.
Status Config::fromEnvironment(Config* out) {
  return fromVariables(environmentValue, out);
}

Status Config::fromVariables(const VariableLookup& lookup, Config* out) {
  Config config;
  for (const ConfigVariable& variable : configVariables()) {
    if (variable.reader != VariableReader::Config) continue;
    const char* text = lookup(variable.name);
    if (text == nullptr || *text == '\0') continue;  // unset or empty: the default
    FW_RETURN_IF_ERROR(variable.apply(text, &config));
  }
  *out = config;
  return Status::ok();
}

}  // namespace fairway
