// The table of variables (core/config_variables.cc) against what users
// read (docs/environment.md) and against the sources: one list of names,
// defaults and meanings, and the environment read in one place.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/config_variables.h"
#include "core/strings.h"

using namespace fairway;

namespace {

struct DocumentedVariable {
  std::string name, defaultText, meaning;
};

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Rows `| `NAME`[, `NAME`...] | default | meaning |`, one entry per name.
std::vector<DocumentedVariable> documentedVariables() {
  std::vector<DocumentedVariable> out;
  std::istringstream lines(readFile(std::filesystem::path(FAIRWAY_SOURCE_DIR) / "docs/environment.md"));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `FAIRWAY_", 0) != 0) continue;
    // Three cells, empty ones kept; a meaning may not hold '|'.
    std::vector<std::string> cells;
    std::istringstream row(line.substr(1, line.size() - 2));
    for (std::string cell; std::getline(row, cell, '|');) cells.push_back(cell);
    EXPECT_EQ(cells.size(), 3u) << line;
    if (cells.size() != 3) continue;
    for (const std::string& quoted : splitString(cells[0], ',')) {
      const std::string name = trim(quoted);
      EXPECT_TRUE(name.size() > 2 && name.front() == '`' && name.back() == '`') << line;
      out.push_back({name.substr(1, name.size() - 2), trim(cells[1]), trim(cells[2])});
    }
  }
  return out;
}

}  // namespace

TEST(ConfigTable, DocumentationListsEveryVariableAsTheCodeDoes) {
  const std::vector<DocumentedVariable> documented = documentedVariables();
  const std::vector<ConfigVariable>& table = configVariables();
  ASSERT_EQ(documented.size(), table.size()) << "docs/environment.md and core/config_variables.cc list "
                                                "different numbers of variables";
  for (size_t i = 0; i < table.size(); ++i) {
    SCOPED_TRACE(table[i].name);
    EXPECT_EQ(documented[i].name, table[i].name) << "row " << i << " (the same order in both)";
    EXPECT_EQ(documented[i].defaultText, table[i].defaultText);
    EXPECT_EQ(documented[i].meaning, table[i].meaning);
  }
}

TEST(ConfigTable, NamesAreUniqueAndConfigVariablesParse) {
  std::vector<std::string> names;
  for (const ConfigVariable& v : configVariables()) {
    SCOPED_TRACE(v.name);
    EXPECT_EQ(std::count(names.begin(), names.end(), v.name), 0);
    names.push_back(v.name);
    const bool readByConfig = v.reader == VariableReader::Config;
    EXPECT_EQ(static_cast<bool>(v.apply), readByConfig);
    EXPECT_EQ(static_cast<bool>(v.show), readByConfig);
  }
}

// Where the documentation gives a value as the default, it is what an
// empty environment yields.
TEST(ConfigTable, DefaultsAreTheValuesAnEmptyEnvironmentYields) {
  Config defaults;
  ASSERT_TRUE(Config::fromVariables([](const char*) -> const char* { return nullptr; }, &defaults).isOk());
  for (const ConfigVariable& v : configVariables()) {
    if (v.reader != VariableReader::Config) continue;
    SCOPED_TRACE(v.name);
    const std::string shown = v.show(defaults);
    if (!shown.empty()) {
      EXPECT_EQ(shown, v.defaultText);
    }
  }
}

// A value shown reads back to the same value, and a value no variable
// accepts is refused with a message naming the variable.
TEST(ConfigTable, ShownValuesReadBackAndBadValuesNameTheVariable) {
  const std::map<std::string, std::string> samples = {
      {"FAIRWAY_TIMEOUT_MS", "1500"},         {"FAIRWAY_SHM_CHUNK_BYTES", "64K"},
      {"FAIRWAY_SLICE_BYTES", "2M"},          {"FAIRWAY_INTRA_LINK", "2,7.5"},
      {"FAIRWAY_NET_DEVICES", "mlx5_0:1,mlx5_1:1"}, {"FAIRWAY_ALGO", "allreduce:0-64K:ranks=2-8:recursive_doubling,allreduce:64K-:ring"},
      {"FAIRWAY_COMPRESS", "allgather:bf16;allreduce:int8/128:1M"}, {"FAIRWAY_MEASURE_LINKS", "1"},
      {"FAIRWAY_TRANSPORT", "nccl"},          {"FAIRWAY_STREAM_WAIT", "host-function"},
      {"FAIRWAY_TRACE_ENTRIES", "500"},       {"FAIRWAY_TRACE_SIGNAL", "USR2"}};
  for (const ConfigVariable& v : configVariables()) {
    if (v.reader != VariableReader::Config) continue;
    SCOPED_TRACE(v.name);
    auto sample = samples.find(v.name);
    if (sample != samples.end()) {
      Config c;
      ASSERT_TRUE(v.apply(sample->second.c_str(), &c).isOk());
      EXPECT_EQ(v.show(c), sample->second);
    }
    // Paths, names and addresses take any text; every other variable
    // refuses this one.
    const std::set<std::string> freeText = {"FAIRWAY_TOPO_FILE",     "FAIRWAY_TOPO_DUMP_FILE", "FAIRWAY_COMM_ID",
                                            "FAIRWAY_JOB_SECRET",    "FAIRWAY_JOB_SECRET_FILE", "FAIRWAY_SOCKET_IFNAME",
                                            "FAIRWAY_NODE_ID",       "FAIRWAY_PLUGIN_PATH",    "FAIRWAY_NET_DEVICES",
                                            "FAIRWAY_TRACE_DIR"};
    Config c;
    const Status refused = v.apply("-1x|", &c);
    if (freeText.count(v.name) > 0) {
      EXPECT_TRUE(refused.isOk()) << refused.message();
      continue;
    }
    EXPECT_EQ(refused.code(), fwInvalidArgument);
    EXPECT_NE(refused.message().find(v.name), std::string::npos) << refused.message();
  }
}

// The process environment is read through core/environment.cc alone.
TEST(ConfigTable, OnlyTheEnvironmentModuleCallsGetenv) {
  const std::filesystem::path root(FAIRWAY_SOURCE_DIR);
  const std::string allowed = "src/core/environment.cc";
  const std::regex call(R"(\bgetenv\s*\()");
  int filesRead = 0;
  for (const char* folder : {"src", "transports", "topo", "python/fairway/csrc"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cc" && ext != ".cpp" && ext != ".h" && ext != ".inc") continue;
      ++filesRead;
      const std::string relative = std::filesystem::relative(entry.path(), root).string();
      if (relative == allowed) continue;
      EXPECT_FALSE(std::regex_search(readFile(entry.path()), call)) << relative << " calls getenv";
    }
  }
  EXPECT_GT(filesRead, 100);
}
