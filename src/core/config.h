// Every FAIRWAY_* setting a communicator takes, read through the table of
// core/config_variables.cc (types, defaults, ranges, meanings). A
// communicator takes a snapshot at creation, so a setting changed later
// affects only communicators created later.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/compression.h"
#include "core/link_model.h"
#include "core/pipeline_settings.h"
#include "core/status.h"

namespace fairway {

// FAIRWAY_COMPRESS: plain calls of a collective compressed from a size on.
struct CompressionRule {
  Compression compression;  // kind and block size (no residual)
  size_t minBytes = 0;      // the call's size as the selector counts it
};

// One FAIRWAY_ALGO item: `algorithm` for calls of `collective` whose
// selection size is in [fromBytes, toBytes) on [minRanks, maxRanks] ranks.
struct AlgoOverride {
  std::string collective;
  std::string algorithm;
  size_t fromBytes = 0;
  size_t toBytes = ~size_t{0};
  int minRanks = 1;
  int maxRanks = std::numeric_limits<int>::max();
  // As FAIRWAY_ALGO takes it: collective[:FROM-TO][:ranks=LO-HI]:algorithm.
  std::string text() const;
};

// A variable's value by name, nullptr when unset: getenv, or a table in tests.
using VariableLookup = std::function<const char*(const char*)>;

// The node segment's chunk with a CPU per rank: a round's copies stay in the caches.
inline constexpr size_t kShmChunkBytesPerCpu = 256 * 1024;

// A size window without an upper end.
inline constexpr size_t kNoUpperEnd = size_t{1} << 40;

struct Config {
  int64_t timeoutMs = 300000;          // FAIRWAY_TIMEOUT_MS
  int64_t traceEntries = 2000;         // FAIRWAY_TRACE_ENTRIES
  std::string traceDir;                // FAIRWAY_TRACE_DIR
  std::string traceSignal = "USR1";    // FAIRWAY_TRACE_SIGNAL: USR1|USR2|none
  std::string transport = "auto";      // FAIRWAY_TRANSPORT: auto|ucx|nccl, every level
  std::string intraTransport = "auto"; // FAIRWAY_INTRA_TRANSPORT: auto|ucx|nccl, inside a node
                                       // (ucx: no shared-memory segment for host buffers either)
  size_t shmChunkBytes = kShmChunkBytesPerCpu;  // FAIRWAY_SHM_CHUNK_BYTES: each local rank's round in the node's segment
  bool shmChunkBytesSet = false;       // given by the variable (else the node's leader picks it:
                                       // SharedMemoryNode::defaultChunkBytes)
  // FAIRWAY_SHM_SINGLE_COPY_BYTES: allgather and all-to-all blocks,
  // broadcasts, allreduces and reduce-scatters of [min, max] bytes read in
  // place (min 0: never). Unset
  // ("auto"): the node picks each window (SharedMemoryNode::default*SingleCopy).
  size_t shmSingleCopyMin = 0;
  size_t shmSingleCopyMax = 0;         // kNoUpperEnd: MIN given alone
  bool shmSingleCopySet = false;
  // FAIRWAY_SHM_STREAM_BYTES: the node's outputs from which the segment's
  // results bypass the caches; 0 ("auto"): the node's last-level cache
  // (SharedMemoryNode::defaultStreamingNodeBytes).
  size_t shmStreamBytes = 0;
  std::string interTransport = "auto"; // FAIRWAY_INTER_TRANSPORT: auto|ucx|nccl, between nodes
  std::vector<AlgoOverride> algoOverrides;  // FAIRWAY_ALGO, in the order written (the first that applies wins)
  std::map<std::string, CompressionRule> compressionRules;  // FAIRWAY_COMPRESS: collective -> rule
  std::string socketIfname;            // FAIRWAY_SOCKET_IFNAME
  std::string commId;                  // FAIRWAY_COMM_ID: host:port of the bootstrap root
  std::string jobSecret;               // FAIRWAY_JOB_SECRET
  std::string jobSecretFile;           // FAIRWAY_JOB_SECRET_FILE: the secret, in a file only its owner reads
  std::string nodeId;                  // FAIRWAY_NODE_ID
  std::string pluginPath;              // FAIRWAY_PLUGIN_PATH
  std::string deviceRuntime = "cuda";  // FAIRWAY_DEVICE_RUNTIME: cuda|none|host-emulated (tests)
  std::string ucxDeviceMemory = "auto";  // FAIRWAY_UCX_DEVICE_MEMORY: auto|direct|staged
  // FAIRWAY_STREAM_WAIT: auto (cuStreamWaitValue32 where the driver has it)
  // or host-function (always the fallback: for measuring one against the other).
  std::string streamWait = "auto";
  std::string topoFile;                // FAIRWAY_TOPO_FILE: hwloc XML read instead of discovering
  std::string topoDumpFile;            // FAIRWAY_TOPO_DUMP_FILE: where to write the topology found
  std::vector<std::string> netDevices; // FAIRWAY_NET_DEVICES: UCX devices, local rank i takes entry i mod n
  PipelineSettings pipeline;           // FAIRWAY_SEGMENT_BYTES, _PIPELINE_DEPTH, _SLICE_BYTES,
                                       // _SLICES_IN_FLIGHT, _MIN_SHARD_BYTES, _STAGING_SLICE_BYTES
  int64_t spinMicros = 2000;           // FAIRWAY_SPIN_US: the most a wait spins before blocking
  std::string waitPolicy = "adaptive"; // FAIRWAY_WAIT: adaptive|spin (p2p/wait_policy.h)
  LinkModel intraLink = kDefaultIntraLink;  // FAIRWAY_INTRA_LINK: cost model "alpha_us,GBps"
  LinkModel interLink = kDefaultInterLink;  // FAIRWAY_INTER_LINK
  bool intraLinkSet = false, interLinkSet = false;  // given by the variables: measuring leaves them
  bool measureLinks = false;           // FAIRWAY_MEASURE_LINKS=1: measure both links at creation

  // Reads the environment; an invalid value fails naming the variable.
  static Status fromEnvironment(Config* out);
  // The same from any source of variables.
  static Status fromVariables(const VariableLookup& lookup, Config* out);
};

}  // namespace fairway
