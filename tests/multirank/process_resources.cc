#include "tests/multirank/process_resources.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace fairway::testing {
namespace {

// Socket inodes of this process's descriptors ("socket:[12345]" links).
std::set<unsigned long> socketInodes() {
  std::set<unsigned long> inodes;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return inodes;
  while (dirent* entry = readdir(dir)) {
    char target[64] = {};
    const std::string path = std::string("/proc/self/fd/") + entry->d_name;
    const ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
    unsigned long inode = 0;
    if (n > 0 && std::sscanf(target, "socket:[%lu]", &inode) == 1) inodes.insert(inode);
  }
  closedir(dir);
  return inodes;
}

// Rows of /proc/net/tcp or tcp6: "sl local rem st ... inode"; state 0A is LISTEN.
void addListening(const char* table, const std::set<unsigned long>& mine, std::set<int>* ports) {
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
    unsigned long inode = 0;
    row >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
    const size_t colon = local.rfind(':');
    if (state != "0A" || colon == std::string::npos || !mine.count(inode)) continue;
    ports->insert(static_cast<int>(std::stoul(local.substr(colon + 1), nullptr, 16)));
  }
}

}  // namespace

std::vector<int> listeningTcpPortsOfThisProcess() {
  const std::set<unsigned long> mine = socketInodes();
  std::set<int> ports;
  addListening("/proc/net/tcp", mine, &ports);
  addListening("/proc/net/tcp6", mine, &ports);
  return std::vector<int>(ports.begin(), ports.end());
}

}  // namespace fairway::testing
