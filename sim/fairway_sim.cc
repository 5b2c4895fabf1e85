// fairway-sim: predicts Fairway's collectives on a cluster that is not at
// hand by running the library's own algorithm code for every simulated
// rank in virtual time (docs/simulator.md).
//
//   fairway-sim --nodes 1024 --ranks-per-node 8 --preset h100-ndr400 -c allreduce -b 1M -e 1G
//
// prints, per size, every algorithm that applies with its predicted time,
// algbw and busbw (nccl-tests' columns and formulas), marking the one the
// selector of a job would pick (*) and the fastest (+).
#include <getopt.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/datatype.h"
#include "core/log.h"
#include "core/command_line_numbers.h"
#include "selection/selection_rows.h"
#include "sim/simulation.h"

using namespace fairway;
using namespace fairway::sim;

extern char** environ;

namespace {

struct Options {
  Scenario scenario;
  std::string preset = "h100-ndr400";
  std::string clusterFile;
  int ranksPerNode = 0;  // 0: the spec's
  size_t minBytes = 1 << 20, maxBytes = 1 << 30;
  double factor = 2;
  std::vector<Algorithm> algorithms;  // empty: every one that applies
  bool selectedOnly = false;
  bool picksOnly = false;  // the selector's pick per size, nothing simulated
  std::string jsonPath, pngPath;
  long traceBytes = -1;
  int threads = 0;
};

struct Row {
  size_t bytes = 0, count = 0;
  Algorithm algorithm = Algorithm::Ring;
  bool selected = false, best = false;
  Outcome outcome;
  double algbw = 0, busbw = 0;
  Status status;
};

void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--nodes N] [--ranks-per-node D] [--preset NAME | --cluster FILE] [-c collective]\n"
               "          [-b minbytes] [-e maxbytes] [-f factor] [-d type] [-o op] [-q compression [-B block]]\n"
               "          [-a algo[,algo...]] [--selected] [--picks] [-J file.json] [--png file.png] [--trace SIZE]\n"
               "          [--slice-bytes B] [--slices-in-flight K] [--min-shard-bytes B] [--segment-bytes B]\n"
               "          [--rail-peers-in-flight K] [--rate-quantum US]\n"
               "          [--model-rails R] [-j threads] [--print-preset NAME]\n"
               "  sizes as nccl-tests give them (K, M, G: powers of 1024); presets: ",
               argv0);
  for (const auto& n : presetNames()) std::fprintf(stderr, "%s ", n.c_str());
  std::fprintf(stderr, "\n");
}

bool parseCollective(const char* text, CollectiveKind* out) {
  for (int k = 0; k < kCollectiveKinds; ++k) {
    const auto kind = static_cast<CollectiveKind>(k);
    std::string name = collectiveName(kind);
    std::string compact;
    for (char c : name) if (c != '_' && c != '-') compact += c;
    std::string given;
    for (const char* p = text; *p; ++p) if (*p != '_' && *p != '-') given += *p;
    if (compact == given) {
      *out = kind;
      return true;
    }
  }
  return false;
}

bool parseAlgorithms(const char* text, std::vector<Algorithm>* out) {
  std::string list = text;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = list.find(',', start);
    const std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    bool found = false;
    for (Algorithm a : namedAlgorithms()) {
      if (name == algorithmName(a)) {
        out->push_back(a);
        found = true;
      }
    }
    if (!found) return false;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return true;
}

bool parseType(const char* text, fwDataType_t* out) {
  for (fwDataType_t t : {fwFloat32, fwFloat16, fwBfloat16, fwFloat64, fwInt32, fwInt64, fwUint8, fwInt8}) {
    if (std::strcmp(text, datatypeName(t)) == 0) {
      *out = t;
      return true;
    }
  }
  return false;
}

bool parseOp(const char* text, fwRedOp_t* out) {
  for (fwRedOp_t op : {fwSum, fwProd, fwMax, fwMin, fwAvg}) {
    if (std::strcmp(text, opName(op)) == 0) {
      *out = op;
      return true;
    }
  }
  return false;
}

bool parseOptions(int argc, char** argv, Options* o) {
  enum { kNodes = 256, kPerNode, kPreset, kCluster, kPng, kTrace, kSelected, kPicks, kSlice, kInFlight, kRailPeers, kRateQuantum, kMinShard, kSegment,
         kPrintPreset, kModelRails };
  static const option longOptions[] = {
      {"nodes", required_argument, nullptr, kNodes},
      {"ranks-per-node", required_argument, nullptr, kPerNode},
      {"preset", required_argument, nullptr, kPreset},
      {"cluster", required_argument, nullptr, kCluster},
      {"png", required_argument, nullptr, kPng},
      {"trace", required_argument, nullptr, kTrace},
      {"selected", no_argument, nullptr, kSelected},
      {"picks", no_argument, nullptr, kPicks},
      {"slice-bytes", required_argument, nullptr, kSlice},
      {"slices-in-flight", required_argument, nullptr, kInFlight},
      {"rail-peers-in-flight", required_argument, nullptr, kRailPeers},
      {"rate-quantum", required_argument, nullptr, kRateQuantum},
      {"min-shard-bytes", required_argument, nullptr, kMinShard},
      {"segment-bytes", required_argument, nullptr, kSegment},
      {"print-preset", required_argument, nullptr, kPrintPreset},
      {"model-rails", required_argument, nullptr, kModelRails},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "c:b:e:f:d:o:q:B:a:J:j:h", longOptions, nullptr)) != -1) {
    bool ok = true;
    size_t bytes = 0;
    double number = 0;
    switch (c) {
      // Whole numbers in range (parseInt): a cast of any double would
      // truncate 2.5 and overflow on 1e12.
      case kNodes: ok = fairway::parseInt(optarg, &o->scenario.nodes, 1); break;
      case kPerNode: ok = fairway::parseInt(optarg, &o->ranksPerNode, 1); break;
      case kPreset: o->preset = optarg; break;
      case kCluster: o->clusterFile = optarg; break;
      case kPng: o->pngPath = optarg; break;
      case kTrace: ok = fairway::parseSize(optarg, &bytes); o->traceBytes = static_cast<long>(bytes); break;
      case kSelected: o->selectedOnly = true; break;
      case kPicks: o->picksOnly = true; break;
      case kSlice: ok = fairway::parseSize(optarg, &o->scenario.pipeline.sliceBytes) && o->scenario.pipeline.sliceBytes > 0; break;
      case kInFlight: ok = fairway::parseInt(optarg, &o->scenario.pipeline.slicesInFlight, 1, 16); break;
      case kRateQuantum: ok = fairway::parseFactor(optarg, &number) && number >= 0;
        o->scenario.rateQuantumUs = number; break;
      case kRailPeers: ok = fairway::parseInt(optarg, &o->scenario.pipeline.railPeersInFlight, 1, 1 << 20); break;
      case kMinShard: ok = fairway::parseSize(optarg, &o->scenario.pipeline.minShardBytes); break;
      case kSegment: ok = fairway::parseSize(optarg, &o->scenario.pipeline.segmentBytes) && o->scenario.pipeline.segmentBytes > 0; break;
      case kModelRails: ok = fairway::parseInt(optarg, &o->scenario.selectorRails, 1, 1024); break;
      case kPrintPreset: {
        std::string text;
        const Status st = clusterPresetText(optarg, &text);
        if (!st.isOk()) {
          std::fprintf(stderr, "fairway-sim: %s\n", st.message().c_str());
          std::exit(2);
        }
        std::fputs(text.c_str(), stdout);
        std::exit(0);
      }
      case 'c': ok = parseCollective(optarg, &o->scenario.kind); break;
      case 'b': ok = fairway::parseSize(optarg, &o->minBytes); break;
      case 'e': ok = fairway::parseSize(optarg, &o->maxBytes); break;
      case 'f': ok = fairway::parseFactor(optarg, &o->factor) && o->factor > 1; break;
      case 'd': ok = parseType(optarg, &o->scenario.datatype); break;
      case 'o': ok = parseOp(optarg, &o->scenario.op); break;
      case 'q':
        ok = false;
        for (int i = 0; i < fwNumCompressions; ++i) {
          if (std::strcmp(optarg, compressionName(static_cast<fwCompressKind_t>(i))) == 0) {
            o->scenario.compression.kind = static_cast<fwCompressKind_t>(i);
            ok = true;
          }
        }
        break;
      case 'B': ok = fairway::parseInt(optarg, &o->scenario.compression.blockSize, 1) &&
                     isValidCompressionBlock(o->scenario.compression.blockSize);
        break;
      case 'a': ok = std::strcmp(optarg, "all") == 0 || parseAlgorithms(optarg, &o->algorithms); break;
      case 'J': o->jsonPath = optarg; break;
      case 'j': ok = fairway::parseInt(optarg, &o->threads, 1, 1024); break;
      case 'h': usage(argv[0]); std::exit(0);
      default: ok = false;
    }
    if (!ok) {
      if (c != '?') std::fprintf(stderr, "fairway-sim: bad value for -%s: %s\n",
                                 c >= 256 ? longOptions[c - 256].name : std::string(1, static_cast<char>(c)).c_str(),
                                 optarg ? optarg : "");
      usage(argv[0]);
      return false;
    }
  }
  if (optind < argc) {
    std::fprintf(stderr, "fairway-sim: unexpected argument %s\n", argv[optind]);
    return false;
  }
  const Status st = o->clusterFile.empty() ? clusterPreset(o->preset, &o->scenario.spec)
                                           : loadClusterSpec(o->clusterFile, &o->scenario.spec);
  if (!st.isOk()) {
    std::fprintf(stderr, "fairway-sim: %s\n", st.message().c_str());
    return false;
  }
  if (o->ranksPerNode > 0) {
    o->scenario.spec.ranksPerNode = o->ranksPerNode;
    o->scenario.spec.nicsPerNode = std::min(o->scenario.spec.nicsPerNode, o->ranksPerNode);
  }
  if (o->minBytes > o->maxBytes) {
    std::fprintf(stderr, "fairway-sim: -b %zu is above -e %zu\n", o->minBytes, o->maxBytes);
    return false;
  }
  const long long ranks = static_cast<long long>(o->scenario.nodes) * o->scenario.spec.ranksPerNode;
  if (ranks > (1 << 20)) {
    std::fprintf(stderr, "fairway-sim: %lld ranks: at most %d are addressable in a message tag\n", ranks, 1 << 20);
    return false;
  }
  return true;
}

std::vector<size_t> sizesOf(const Options& o) {
  std::vector<size_t> sizes;
  for (double b = static_cast<double>(o.minBytes); b <= static_cast<double>(o.maxBytes) * 1.0000001; b *= o.factor) {
    sizes.push_back(static_cast<size_t>(b));
  }
  return sizes;
}

void writeJson(const Options& o, const std::vector<Row>& rows) {
  FILE* f = std::fopen(o.jsonPath.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "fairway-sim: cannot write %s\n", o.jsonPath.c_str());
    return;
  }
  const Scenario& s = o.scenario;
  std::fprintf(f, "{\n  \"benchmark\": \"fairway-sim\",\n  \"collective\": \"%s\",\n  \"cluster\": \"%s\",\n"
               "  \"nodes\": %d,\n  \"ranks_per_node\": %d,\n  \"ranks\": %d,\n  \"type\": \"%s\",\n"
               "  \"busbw_factor\": %.6f,\n  \"rows\": [",
               collectiveName(s.kind), s.spec.name.c_str(), s.nodes, s.spec.ranksPerNode, s.ranks(),
               datatypeName(s.datatype), busFactor(s.kind, s.ranks()));
  bool first = true;
  for (const Row& r : rows) {
    if (!r.status.isOk()) continue;
    std::fprintf(f, "%s\n    {\"size\": %zu, \"count\": %zu, \"algorithm\": \"%s\", \"selected\": %s, \"best\": %s, "
                 "\"time_us\": %.3f, \"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, \"messages\": %llu, "
                 "\"events\": %llu, \"settles\": %llu, \"flows_settled\": %llu, \"largest_component\": %zu, "
                 "\"wall_s\": %.3f}",
                 first ? "" : ",", r.bytes, r.count, algorithmName(r.algorithm), r.selected ? "true" : "false",
                 r.best ? "true" : "false", r.outcome.timeUs, r.algbw, r.busbw,
                 static_cast<unsigned long long>(r.outcome.stats.messages),
                 static_cast<unsigned long long>(r.outcome.stats.events),
                 static_cast<unsigned long long>(r.outcome.stats.settles),
                 static_cast<unsigned long long>(r.outcome.stats.flowsSettled), r.outcome.stats.largestComponent,
                 r.outcome.stats.wallSeconds);
    first = false;
  }
  std::fprintf(f, "\n  ]\n}\n");
  std::fclose(f);
}

// busbw against size, one line per algorithm, with gnuplot (as scripts/compare.sh plots).
void writePng(const Options& o, const std::vector<Row>& rows, const std::vector<Algorithm>& algorithms) {
  const std::string data = o.pngPath + ".dat";
  FILE* f = std::fopen(data.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "fairway-sim: cannot write %s\n", data.c_str());
    return;
  }
  for (Algorithm a : algorithms) {
    std::fprintf(f, "# %s\n", algorithmName(a));
    for (const Row& r : rows) {
      if (r.algorithm == a && r.status.isOk()) std::fprintf(f, "%zu %.6f\n", r.bytes, r.busbw);
    }
    std::fprintf(f, "\n\n");
  }
  std::fclose(f);
  // A gnuplot script file run without a shell, its strings quoted as
  // gnuplot reads them, so no character of a path or spec name is taken as
  // anything else.
  auto quoted = [](const std::string& text) {
    std::string q = "'";
    for (char c : text) q += c == '\'' ? std::string("''") : std::string(1, c);
    return q + "'";
  };
  std::string script = "set terminal pngcairo size 900,540 font ',10' noenhanced\nset output " + quoted(o.pngPath) +
                       "\nset logscale x 2\nset xlabel 'size (bytes)'\nset ylabel 'busbw (GB/s)'\nset key left top\n"
                       "set title " +
                       quoted("fairway-sim: " + std::string(collectiveName(o.scenario.kind)) + ", " +
                              std::to_string(o.scenario.nodes) + " x " + std::to_string(o.scenario.spec.ranksPerNode) +
                              " ranks, " + o.scenario.spec.name) +
                       "\nplot ";
  for (size_t i = 0; i < algorithms.size(); ++i) {
    script += std::string(i ? ", " : "") + quoted(data) + " index " + std::to_string(i) + " with linespoints title " +
              quoted(algorithmName(algorithms[i]));
  }
  const std::string scriptPath = o.pngPath + ".gp";
  FILE* g = std::fopen(scriptPath.c_str(), "w");
  bool written = g != nullptr && std::fputs((script + "\n").c_str(), g) >= 0;
  if (g != nullptr) written = std::fclose(g) == 0 && written;
  if (!written) {
    std::fprintf(stderr, "fairway-sim: cannot write %s\n", scriptPath.c_str());
    return;
  }
  char gnuplot[] = "gnuplot";
  std::string scriptArg = scriptPath;
  char* argv[] = {gnuplot, scriptArg.data(), nullptr};
  pid_t pid = -1;
  int status = -1;
  const bool drew = posix_spawnp(&pid, "gnuplot", nullptr, nullptr, argv, environ) == 0 &&
                    waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::remove(scriptPath.c_str());
  if (!drew) {
    std::fprintf(stderr, "fairway-sim: gnuplot could not draw %s (scripts/setup.sh installs gnuplot-nox); the data "
                 "is in %s\n", o.pngPath.c_str(), data.c_str());
    return;
  }
  std::remove(data.c_str());
  std::printf("# plot: %s\n", o.pngPath.c_str());
}

int traceOne(const Options& o) {
  const Scenario& s = o.scenario;
  const size_t count = countForSize(s, static_cast<size_t>(o.traceBytes));
  const Algorithm a = o.algorithms.empty() ? selectorChoice(s, count).algorithm : o.algorithms.front();
  Outcome out;
  std::vector<TraceRecord> trace;
  const Status st = simulate(s, count, a, &out, &trace);
  if (!st.isOk()) {
    std::fprintf(stderr, "fairway-sim: %s\n", st.message().c_str());
    return 1;
  }
  std::printf("# fairway-sim --trace: %s of %ld bytes by %s on %d x %d ranks (%s): %zu messages, %.3f us\n",
              collectiveName(s.kind), o.traceBytes, algorithmName(a), s.nodes, s.spec.ranksPerNode,
              s.spec.name.c_str(), trace.size(), out.timeUs);
  std::printf("# %5s %5s %12s %6s %12s %12s %12s %12s %12s  %s\n", "src", "dst", "bytes", "step", "send_us",
              "recv_us", "start_us", "end_us", "arrive_us", "path");
  for (const TraceRecord& t : trace) {
    std::printf("  %5d %5d %12zu %6u %12.3f %12.3f %12.3f %12.3f %12.3f  %s\n", t.src, t.dst, t.bytes,
                static_cast<unsigned>(t.tag & 0x3ff), t.sendPosted, t.recvPosted, t.flowStart, t.flowEnd,
                t.delivered, t.path.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parseOptions(argc, argv, &o)) return 2;
  if (o.traceBytes >= 0) return traceOne(o);
  const Scenario& s = o.scenario;
  const int n = s.ranks();
  if (o.picksOnly) {
    // What a job's selector would run, instantly, at any size of cluster.
    // Then the cost model's prediction (us) of every algorithm that applies.
    std::printf("# fairway-sim --picks: %s on %d x %d ranks (%s)\n#%13s %-20s %-12s %s\n", collectiveName(s.kind),
                s.nodes, s.spec.ranksPerNode, s.spec.name.c_str(), "size (B)", "pick", "rule", "model (us)");
    for (size_t bytes : sizesOf(o)) {
      const size_t count = countForSize(s, bytes);
      if (count == 0) continue;
      const Selection pick = selectorChoice(s, count);
      std::string model;
      for (const auto& [a, us] : modelPredictions(s, count)) {
        char item[64];
        if (us >= 0) std::snprintf(item, sizeof(item), " %s=%.1f", algorithmName(a), us);
        else std::snprintf(item, sizeof(item), " %s=-", algorithmName(a));
        model += item;
      }
      std::printf("%14zu %-20s %-12s%s\n", bytes, algorithmName(pick.algorithm), pick.rule, model.c_str());
    }
    return 0;
  }
  std::vector<Row> rows;
  std::vector<Algorithm> shown;
  for (size_t bytes : sizesOf(o)) {
    const size_t count = countForSize(s, bytes);
    if (count == 0) continue;
    const Selection pick = selectorChoice(s, count);
    std::vector<Algorithm> algorithms = o.algorithms.empty() ? applicableAlgorithms(s, count) : o.algorithms;
    if (o.selectedOnly) algorithms = {pick.algorithm};
    for (Algorithm a : algorithms) {
      Row r;
      r.bytes = bytes;
      r.count = count;
      r.algorithm = a;
      r.selected = a == pick.algorithm;
      rows.push_back(r);
      if (std::find(shown.begin(), shown.end(), a) == shown.end()) shown.push_back(a);
    }
  }
  // Every (size, algorithm) is a simulation of its own: spread over threads.
  const int threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < rows.size(); i = next++) {
        Row& r = rows[i];
        r.status = simulate(s, r.count, r.algorithm, &r.outcome);
        if (r.status.isOk() && r.outcome.timeUs > 0) {
          r.algbw = static_cast<double>(r.bytes) / (r.outcome.timeUs * 1e3);
          r.busbw = r.algbw * busFactor(s.kind, n);
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  // The fastest of each size.
  for (size_t i = 0; i < rows.size();) {
    size_t j = i, best = rows.size();
    for (; j < rows.size() && rows[j].bytes == rows[i].bytes; ++j) {
      if (rows[j].status.isOk() && (best == rows.size() || rows[j].outcome.timeUs < rows[best].outcome.timeUs)) best = j;
    }
    if (best != rows.size()) rows[best].best = true;
    i = j;
  }
  std::printf("# fairway-sim: %s on %d nodes x %d ranks = %d ranks, cluster %s, %s %s%s%s\n", collectiveName(s.kind),
              s.nodes, s.spec.ranksPerNode, n, s.spec.name.c_str(), datatypeName(s.datatype), opName(s.op),
              s.compression.active() ? ", compressed " : "",
              s.compression.active() ? compressionName(s.compression.kind) : "");
  std::printf("# predicted times in virtual time; * the algorithm a job's selector picks, + the fastest\n#\n");
  std::printf("# %12s %12s %-20s %12s %8s %8s %12s %10s %8s\n", "size", "count", "algorithm", "time(us)",
              "algbw", "busbw", "messages", "events/s", "wall(s)");
  std::printf("# %12s %12s %-20s %12s %8s %8s %12s %10s %8s\n", "(B)", "(elements)", "", "", "(GB/s)", "(GB/s)", "",
              "", "");
  int failures = 0;
  for (const Row& r : rows) {
    const std::string name = std::string(r.selected ? "*" : " ") + (r.best ? "+" : " ") + algorithmName(r.algorithm);
    if (!r.status.isOk()) {
      std::printf("  %12zu %12zu %-20s  failed: %s\n", r.bytes, r.count, name.c_str(), r.status.message().c_str());
      ++failures;
      continue;
    }
    const RunStats& st = r.outcome.stats;
    std::printf("  %12zu %12zu %-20s %12.2f %8.2f %8.2f %12llu %10.3g %8.2f\n", r.bytes, r.count, name.c_str(),
                r.outcome.timeUs, r.algbw, r.busbw, static_cast<unsigned long long>(st.messages),
                st.wallSeconds > 0 ? st.events / st.wallSeconds : 0.0, st.wallSeconds);
  }
  if (!o.jsonPath.empty()) writeJson(o, rows);
  if (!o.pngPath.empty()) writePng(o, rows, shown);
  return failures == 0 ? 0 : 1;
}
