#include "comm/device_call_shapes.h"

namespace fairway {
namespace {

template <typename T>
void append(std::string* key, const T& value) {
  key->append(reinterpret_cast<const char*>(&value), sizeof value);
}

void appendCounts(std::string* key, const size_t* values, int nranks) {
  if (values == nullptr) return append(key, size_t{0});
  key->append(reinterpret_cast<const char*>(values), sizeof(size_t) * static_cast<size_t>(nranks));
}

}  // namespace

std::string DeviceCallShapes::keyOf(const CollectiveArgs& args, int nranks) {
  std::string key;
  append(&key, static_cast<int>(args.kind));
  append(&key, args.count);
  append(&key, static_cast<int>(args.datatype));
  append(&key, static_cast<int>(args.op));
  append(&key, args.root);
  append(&key, args.send == args.recv);
  append(&key, args.listForm());
  append(&key, static_cast<int>(args.compression.kind));
  append(&key, args.compression.blockSize);
  append(&key, args.compression.residual != nullptr);
  appendCounts(&key, args.sendcounts, nranks);
  appendCounts(&key, args.sdispls, nranks);
  appendCounts(&key, args.recvcounts, nranks);
  appendCounts(&key, args.rdispls, nranks);
  return key;
}

void DeviceCallShapes::remember(const std::string& key) {
  if (keys_.size() >= kMostShapes) keys_.clear();
  keys_.insert(key);
}

}  // namespace fairway
