// The layers of the library (docs/design/layers.md, "Layers"): each folder
// includes only folders below it, and no two files of one folder include
// each other (a header and its .cc count as one file). A new include that
// runs upward, or a new cycle, fails here with the file and the include.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Lowest first. Folders of one level are independent of each other.
const std::vector<std::vector<std::string>> kLevels = {
    {"include"},                            // the public C API
    {"src/core"},                           // status, types, kernels, config
    {"src/collective", "topo", "transports", "src/bootstrap"},  // what a call is; the machine; plugin interfaces
    {"src/p2p", "src/trace"},               // messenger, tags, scratch, waits; flight records and their dumps
    {"src/algorithms"},                     // each algorithm once, and the dispatch to it
    {"src/selection", "src/providers"},     // the selection table; who moves a phase's data
    {"src/comm"},                           // communicator: lifecycle, executor, device calls
    {"src/api"},                            // the C entry points
};

// The folder an include or a file belongs to: src/<x>, or a top folder.
std::string folderOf(const std::string& path) {
  const size_t slash = path.find('/');
  if (path.rfind("src/", 0) == 0) return path.substr(0, path.find('/', 4));
  return path.substr(0, slash);
}

int levelOf(const std::string& folder) {
  for (size_t level = 0; level < kLevels.size(); ++level) {
    for (const std::string& f : kLevels[level]) {
      if (f == folder) return static_cast<int>(level);
    }
  }
  return -1;
}

struct Source {
  std::string path;                   // from the repository root
  std::vector<std::string> includes;  // as repository paths
};

std::vector<Source> sources() {
  const fs::path root(FAIRWAY_SOURCE_DIR);
  const std::regex include(R"(#include\s+"([^"]+)\")");
  std::vector<Source> out;
  for (const char* folder : {"src", "topo", "transports"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cc" && ext != ".h" && ext != ".inc") continue;
      Source source{fs::relative(entry.path(), root).string(), {}};
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string body = text.str();
      for (std::sregex_iterator m(body.begin(), body.end(), include), end; m != end; ++m) {
        const std::string name = (*m)[1];
        // Includes are written from src/, from the root, or from include/.
        for (const std::string prefix : {"src/", "", "include/"}) {
          if (fs::exists(root / (prefix + name))) {
            source.includes.push_back(prefix + name);
            break;
          }
        }
      }
      out.push_back(source);
    }
  }
  return out;
}

// A header and its .cc are one unit.
std::string unitOf(const std::string& path) { return fs::path(path).replace_extension().string(); }

}  // namespace

TEST(Layering, EveryFolderHasALevel) {
  for (const Source& s : sources()) EXPECT_GE(levelOf(folderOf(s.path)), 0) << s.path << ": add its folder to kLevels";
}

TEST(Layering, IncludesPointOnlyDownward) {
  int checked = 0;
  for (const Source& s : sources()) {
    const std::string from = folderOf(s.path);
    for (const std::string& target : s.includes) {
      const std::string to = folderOf(target);
      ++checked;
      if (to == from) continue;
      EXPECT_LT(levelOf(to), levelOf(from)) << s.path << " includes " << target << ": " << to << " is not below "
                                            << from;
    }
  }
  EXPECT_GT(checked, 300);
}

TEST(Layering, NoTwoFilesOfAFolderIncludeEachOther) {
  std::map<std::string, std::set<std::string>> uses;  // unit -> units of its folder it includes
  for (const Source& s : sources()) {
    for (const std::string& target : s.includes) {
      if (folderOf(target) == folderOf(s.path) && unitOf(target) != unitOf(s.path)) {
        uses[unitOf(s.path)].insert(unitOf(target));
      }
    }
  }
  for (const auto& [unit, used] : uses) {
    for (const std::string& other : used) {
      if (unit < other && uses[other].count(unit) > 0) {
        ADD_FAILURE() << unit << " and " << other << " include each other";
      }
    }
  }
}

// Small files: none of the library's or the Python package's sources
// grows past 500 lines (split it by concern instead).
TEST(Layering, NoSourceFileOver500Lines) {
  const fs::path root(FAIRWAY_SOURCE_DIR);
  int filesRead = 0;
  for (const char* folder : {"src", "topo", "transports", "python/fairway", "python/tests"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cc" && ext != ".h" && ext != ".inc" && ext != ".cpp" && ext != ".py") continue;
      std::ifstream in(entry.path());
      int lines = 0;
      for (std::string line; std::getline(in, line);) ++lines;
      ++filesRead;
      EXPECT_LE(lines, 500) << fs::relative(entry.path(), root).string() << " has " << lines << " lines";
    }
  }
  EXPECT_GT(filesRead, 150);
}
