#include "algorithms/registry.h"

#include <atomic>
#include <mutex>

namespace fairway {

namespace {

// Built-in rows at their ids, then registered ones. A registered row is
// written, then the count published (release), so a reader that sees the
// count sees the row; rows never change or go away once published.
struct Table {
  static constexpr int kCapacity = AlgorithmList::kCapacity;
  const AlgorithmRow* rows[kCapacity] = {
#define FW_ROW_ADDRESS(id, row) &row,
      FAIRWAY_BUILTIN_ALGORITHMS(FW_ROW_ADDRESS)
#undef FW_ROW_ADDRESS
  };
  AlgorithmRow registered[kCapacity] = {};
  std::string names[kCapacity];  // registered rows' names, kept here
  std::atomic<int> count{kBuiltinAlgorithms};
  std::mutex adding;
};
static_assert(kBuiltinAlgorithms <= Table::kCapacity, "more built-in algorithms than the registry holds");

Table& table() {
  static Table t;
  return t;
}

bool sameName(const char* a, const std::string& b) { return a != nullptr && b == a; }

}  // namespace

const AlgorithmRow* rowOf(Algorithm algorithm) {
  const int id = static_cast<int>(algorithm);
  Table& t = table();
  return id < t.count.load(std::memory_order_acquire) ? t.rows[id] : nullptr;
}

const char* algorithmName(Algorithm algorithm) {
  const AlgorithmRow* row = rowOf(algorithm);
  return row != nullptr ? row->name : "?";
}

bool isCompressedAlgorithm(Algorithm algorithm) {
  const AlgorithmRow* row = rowOf(algorithm);
  return row != nullptr && row->compressed;
}

std::optional<Algorithm> algorithmNamed(const std::string& name) {
  for (Algorithm a : namedAlgorithms()) {
    if (sameName(rowOf(a)->name, name)) return a;
  }
  return std::nullopt;
}

AlgorithmList namedAlgorithms() {
  AlgorithmList out;
  Table& t = table();
  const int count = t.count.load(std::memory_order_acquire);
  for (int id = 0; id < count; ++id) {
    if (!t.rows[id]->tableOnly) out.push(static_cast<Algorithm>(id));
  }
  return out;
}

AlgorithmList algorithmsOf(CollectiveKind kind) {
  AlgorithmList out;
  Table& t = table();
  const int count = t.count.load(std::memory_order_acquire);
  for (int id = 0; id < count; ++id) {
    if (!t.rows[id]->tableOnly && (t.rows[id]->collectives & bitOf(kind)) != 0) out.push(static_cast<Algorithm>(id));
  }
  return out;
}

Status registerAlgorithm(const AlgorithmRow& row, Algorithm* id) {
  const std::string name = row.name != nullptr ? row.name : "";
  auto refuse = [&](const std::string& why) {
    return Status(fwInvalidArgument, "algorithm '" + name + "' cannot be registered: " + why);
  };
  if (name.empty()) return refuse("it has no name");
  if ((row.collectives & kAnyCollective) == 0 || (row.collectives & ~kAnyCollective) != 0) {
    return refuse("its collectives are no set of bitOf(CollectiveKind)");
  }
  if (row.run == nullptr) return refuse("it has no run function");
  if (row.placement == Placement::ProviderOwn || row.tableOnly) {
    return refuse("a provider's own collective is the default table's, not a registered row");
  }
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.adding);
  const int count = t.count.load(std::memory_order_relaxed);
  for (int i = 0; i < count; ++i) {
    if (sameName(t.rows[i]->name, name)) return refuse("the name is taken");
  }
  if (count == Table::kCapacity) return refuse("the registry is full (" + std::to_string(count) + " algorithms)");
  AlgorithmRow& kept = t.registered[count];
  kept = row;
  t.names[count] = name;
  kept.name = t.names[count].c_str();
  t.rows[count] = &kept;
  t.count.store(count + 1, std::memory_order_release);
  *id = static_cast<Algorithm>(count);
  return Status::ok();
}

double predictMicros(CollectiveKind kind, Algorithm algorithm, size_t bytes, const ClusterShape& shape) {
  const AlgorithmRow* row = rowOf(algorithm);
  if (row == nullptr || row->cost == nullptr || (row->collectives & bitOf(kind)) == 0) return -1;
  return row->cost(kind, CostTerms(bytes, shape));
}

}  // namespace fairway
