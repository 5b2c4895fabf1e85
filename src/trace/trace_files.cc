#include "trace/trace_files.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace fairway {

namespace {

constexpr const char* kFileMarker = ".fairway_rank";
constexpr size_t kLargestDump = size_t{1} << 30;

bool readWhole(const std::string& path, std::string* bytes, std::string* why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *why = std::strerror(errno);
    return false;
  }
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || static_cast<size_t>(size) > kLargestDump) {
    *why = "larger than 1 GiB";
    return false;
  }
  in.seekg(0);
  bytes->resize(static_cast<size_t>(size));
  in.read(bytes->data(), size);
  if (!in) {
    *why = "read failed";
    return false;
  }
  return true;
}

}  // namespace

Status readTraceDir(const std::string& dir, std::vector<TraceFile>* files, std::vector<std::string>* unreadable) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return Status(fwInvalidArgument, "cannot read the directory " + dir + ": " + std::strerror(errno));
  std::vector<std::string> names;
  while (dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    if (name.empty() || name[0] == '.') continue;  // a dump being written, and . and ..
    const size_t marker = name.find(kFileMarker);
    if (marker == std::string::npos) continue;
    names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    std::string bytes, why;
    if (!readWhole(path, &bytes, &why)) {
      unreadable->push_back(path + ": " + why);
      continue;
    }
    TraceFile file;
    file.path = path;
    const Status st = decodeTraceDump(bytes, &file.dump);
    if (!st.isOk()) {
      unreadable->push_back(path + ": " + st.message());
      continue;
    }
    if (file.dump.communicators.empty()) {
      unreadable->push_back(path + ": holds no communicator");
      continue;
    }
    files->push_back(std::move(file));
  }
  return Status::ok();
}

}  // namespace fairway
