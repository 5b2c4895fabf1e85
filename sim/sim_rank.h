// What one simulated rank's algorithm code talks to: its messages
// (SimPort, a MessagePort that posts into the engine and waits in virtual
// time) and its data (SimDataSpace, which charges the rank's clock for
// every copy, reduction and compression step by bytes and touches
// nothing). Scratch memory is an address range per region that is never
// dereferenced, so a simulated gigabyte costs no memory.
#pragma once

#include <cstdint>

#include "algorithms/data_space.h"
#include "core/datatype.h"
#include "p2p/message_port.h"
#include "sim/engine.h"

namespace fairway::sim {

class SimPort final : public MessagePort {
 public:
  SimPort(Engine& engine, int rank) : engine_(engine), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return engine_.ranks(); }
  Status send(int peer, const void*, size_t bytes, uint64_t tag, Pending* out, MemoryType) override {
    return engine_.post(rank_, /*isSend=*/true, peer, bytes, tag, out);
  }
  Status recv(int peer, void*, size_t bytes, uint64_t tag, Pending* out, MemoryType) override {
    return engine_.post(rank_, /*isSend=*/false, peer, bytes, tag, out);
  }
  Status waitAll(Pending* list, size_t count) override { return engine_.waitAll(rank_, list, count); }

 private:
  Engine& engine_;
  int rank_;
};

// Where simulated buffers seem to lie: far apart, never mapped.
constexpr uintptr_t kSimSendBuffer = uintptr_t{1} << 44;
constexpr uintptr_t kSimRecvBuffer = uintptr_t{2} << 44;
constexpr uintptr_t kSimScratch = uintptr_t{3} << 44;

class SimDataSpace final : public DataSpace {
 public:
  SimDataSpace(Engine& engine, int rank) : engine_(engine), rank_(rank), spec_(engine.spec()) {}
  bool onDevice() const override { return spec_.onDevice; }
  MemoryType memoryType() const override { return spec_.onDevice ? MemoryType::Cuda : MemoryType::Host; }
  Status copy(void* dst, const void* src, size_t bytes) override {
    if (dst != src && bytes > 0) work(bytes, spec_.copyGBs);
    return Status::ok();
  }
  Status combine(const Reducer& reducer, void*, const void*, const void*, size_t count) override {
    if (count > 0) work(count * datatypeSize(reducer.datatype()), spec_.reduceGBs);
    return Status::ok();
  }
  Status finalize(const Reducer& reducer, void*, size_t count) override {
    if (reducer.finalizes() && count > 0) work(count * datatypeSize(reducer.datatype()), spec_.reduceGBs);
    return Status::ok();
  }
  Status codec(const kernels::CodecStep& step) override {
    if (step.count > 0) work(step.count * datatypeSize(step.valueType), spec_.codecGBs);
    return Status::ok();
  }
  Status zero(void*, size_t bytes) override {
    if (bytes > 0) work(bytes, spec_.copyGBs);
    return Status::ok();
  }
  char* scratch(ScratchRegion region, size_t) override {
    return reinterpret_cast<char*>(kSimScratch + (static_cast<uintptr_t>(region) << 40));
  }

 private:
  // A kernel's launch, then its bytes at one processor's rate (shared
  // with other ranks where the spec says they share processors).
  void work(size_t bytes, double gbPerSec) {
    engine_.charge(rank_, spec_.kernelLaunchUs);
    engine_.work(rank_, static_cast<double>(bytes) / (gbPerSec * 1e3));
  }
  Engine& engine_;
  int rank_;
  const ClusterSpec& spec_;
};

}  // namespace fairway::sim
