// The host-emulated runtime's stand-in for NCCL: native collectives on its
// "device" memory, so the core's NCCL branches (flat native collectives,
// two-phase with NCCL inside nodes) run in ctest without a GPU. Each
// communicator is a Fairway communicator of its own over the same ranks,
// reached through Fairway's public C API in this process (resolved at run
// time, so the plugin links nothing of the core); an operation is enqueued
// on the caller's emulated stream and runs there, later, in order, as a
// kernel would: copy into host bounce memory, Fairway's host collective,
// copy back. Like NCCL it has no bitwise reductions. A failure is kept as
// the communicator's asynchronous error, as NCCL reports one.
#include "transports/emulated/emulated_native_collectives.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/datatype.h"
#include "fairway/fairway.h"

namespace fairway {
namespace {

// Fairway's C API as this process has it.
struct Api {
  decltype(&fwGetUniqueId) getUniqueId = nullptr;
  decltype(&fwCommInitRank) initRank = nullptr;
  decltype(&fwCommDestroy) destroy = nullptr;
  decltype(&fwCommAbort) abort = nullptr;
  decltype(&fwAllReduce) allReduce = nullptr;
  decltype(&fwReduceScatter) reduceScatter = nullptr;
  decltype(&fwAllGather) allGather = nullptr;
  decltype(&fwBroadcast) broadcast = nullptr;
  decltype(&fwReduce) reduce = nullptr;
  decltype(&fwSend) send = nullptr;
  decltype(&fwRecv) recv = nullptr;
  decltype(&fwGetLastErrorMessage) lastError = nullptr;
  decltype(&fwCommShrink) shrink = nullptr;  // optional: without it, no shrink
  bool complete() const {
    return getUniqueId && initRank && destroy && abort && allReduce && reduceScatter && allGather && broadcast &&
           reduce && send && recv && lastError;
  }
};

const Api& api() {
  static const Api resolved = [] {
    Api a;
    auto find = [](auto* slot, const char* name) { *slot = reinterpret_cast<std::decay_t<decltype(*slot)>>(dlsym(RTLD_DEFAULT, name)); };
    find(&a.getUniqueId, "fwGetUniqueId");
    find(&a.initRank, "fwCommInitRank");
    find(&a.destroy, "fwCommDestroy");
    find(&a.abort, "fwCommAbort");
    find(&a.allReduce, "fwAllReduce");
    find(&a.reduceScatter, "fwReduceScatter");
    find(&a.allGather, "fwAllGather");
    find(&a.broadcast, "fwBroadcast");
    find(&a.reduce, "fwReduce");
    find(&a.send, "fwSend");
    find(&a.recv, "fwRecv");
    find(&a.lastError, "fwGetLastErrorMessage");
    find(&a.shrink, "fwCommShrink");
    return a;
  }();
  return resolved;
}

class EmulatedNative final : public NativeCollectives {
 public:
  EmulatedNative(fwComm_t comm, int rank, int size, const EmulatedStreamQueue& queue)
      : comm_(comm), queue_(queue), rank_(rank), size_(size) {}
  ~EmulatedNative() override {
    if (comm_ != nullptr) (void)api().destroy(comm_);
  }

  Status allReduce(const void* send, void* recv, size_t count, fwDataType_t datatype, fwRedOp_t op,
                   void* stream) override {
    const size_t bytes = count * datatypeSize(datatype);
    return enqueue(stream, "allreduce", send, bytes, recv, bytes, [=](void* in, void* out) {
      return api().allReduce(in, out, count, datatype, op, comm_, nullptr);
    });
  }
  Status reduceScatter(const void* send, void* recv, size_t recvCount, fwDataType_t datatype, fwRedOp_t op,
                       void* stream) override {
    const size_t bytes = recvCount * datatypeSize(datatype);
    return enqueue(stream, "reducescatter", send, bytes * size(), recv, bytes, [=](void* in, void* out) {
      return api().reduceScatter(in, out, recvCount, datatype, op, comm_, nullptr);
    });
  }
  Status allGather(const void* send, void* recv, size_t sendCount, fwDataType_t datatype, void* stream) override {
    const size_t bytes = sendCount * datatypeSize(datatype);
    return enqueue(stream, "allgather", send, bytes, recv, bytes * size(), [=](void* in, void* out) {
      return api().allGather(in, out, sendCount, datatype, comm_, nullptr);
    });
  }
  Status broadcast(const void* send, void* recv, size_t count, fwDataType_t datatype, int root,
                   void* stream) override {
    const size_t bytes = count * datatypeSize(datatype);
    return enqueue(stream, "broadcast", rank() == root ? send : nullptr, bytes, recv, bytes,
                   [=](void* in, void* out) { return api().broadcast(in, out, count, datatype, root, comm_, nullptr); });
  }
  Status reduce(const void* send, void* recv, size_t count, fwDataType_t datatype, fwRedOp_t op, int root,
                void* stream) override {
    const size_t bytes = count * datatypeSize(datatype);
    return enqueue(stream, "reduce", send, bytes, rank() == root ? recv : nullptr, bytes, [=](void* in, void* out) {
      return api().reduce(in, out, count, datatype, op, root, comm_, nullptr);
    });
  }
  Status send(const void* buf, size_t count, fwDataType_t datatype, int peer, void* stream) override {
    const size_t bytes = count * datatypeSize(datatype);
    return enqueue(stream, "send", buf, bytes, nullptr, 0, [=](void* in, void*) {
      return api().send(in, count, datatype, peer, comm_, nullptr);
    });
  }
  Status recv(void* buf, size_t count, fwDataType_t datatype, int peer, void* stream) override {
    const size_t bytes = count * datatypeSize(datatype);
    return enqueue(stream, "recv", nullptr, 0, buf, bytes, [=](void*, void* out) {
      return api().recv(out, count, datatype, peer, comm_, nullptr);
    });
  }

  Status asyncError() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }
  void abort() override {
    if (comm_ != nullptr) api().abort(comm_);
    comm_ = nullptr;
  }

  // ncclCommShrink's stand-in: the survivors shrink the Fairway
  // communicator underneath, which agrees among them as NCCL's does.
  bool canShrink() const override { return comm_ != nullptr && api().shrink != nullptr; }
  Status shrink(const std::vector<int>& exclude, bool abortInFlight,
                std::unique_ptr<NativeCollectives>* out) override {
    out->reset();
    if (!canShrink()) return Status(fwInternalError, "host-emulated NCCL: cannot shrink");
    fwComm_t shrunk = nullptr;
    const fwResult_t r = api().shrink(comm_, exclude.data(), static_cast<int>(exclude.size()),
                                      abortInFlight ? FAIRWAY_SHRINK_ABORT : FAIRWAY_SHRINK_DEFAULT, &shrunk);
    if (r != fwSuccess) return Status(r, std::string("host-emulated ncclCommShrink: ") + api().lastError());
    int rank = 0;
    for (int lower = 0; lower < rank_; ++lower) rank += std::find(exclude.begin(), exclude.end(), lower) == exclude.end() ? 1 : 0;
    *out = std::make_unique<EmulatedNative>(shrunk, rank, size_ - static_cast<int>(exclude.size()), queue_);
    return Status::ok();
  }

 private:
  int rank() const { return rank_; }
  size_t size() const { return static_cast<size_t>(size_); }

  // On the stream, later: the inputs into host bounce memory (so Fairway
  // sees host buffers), the host collective, the result back.
  template <typename Call>
  Status enqueue(void* stream, const char* what, const void* in, size_t inBytes, void* out, size_t outBytes,
                 Call call) {
    FW_RETURN_IF_ERROR(asyncError());
    queue_(stream, [this, what, in, inBytes, out, outBytes, call] {
      // Out of place on the host whatever the caller's layout: the input
      // is copied whole before anything is written back.
      std::vector<char> hostIn(inBytes + 1), hostOut(outBytes + 1);
      if (in != nullptr && inBytes > 0) std::memcpy(hostIn.data(), in, inBytes);
      fwResult_t result = call(hostIn.data(), hostOut.data());
      if (result != fwSuccess) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (error_.isOk()) {
          error_ = Status(fwRemoteError, std::string("host-emulated NCCL ") + what + ": " + api().lastError());
        }
        return;
      }
      if (out != nullptr && outBytes > 0) std::memcpy(out, hostOut.data(), outBytes);
    });
    return Status::ok();
  }

  fwComm_t comm_;
  EmulatedStreamQueue queue_;
  int rank_, size_;
  std::mutex mutex_;
  Status error_;
};

EmulatedStreamQueue& streamQueue() {
  static EmulatedStreamQueue queue;
  return queue;
}

Status emulatedAvailable() {
  if (!api().complete()) {
    return Status(fwNotAvailable, "the host-emulated NCCL needs Fairway's C API (libfairway.so) in the process");
  }
  return Status::ok();
}

bool emulatedSupports(fwDataType_t, fwRedOp_t op) { return op != fwBand && op != fwBor && op != fwBxor; }

Status emulatedMakeUniqueId(std::vector<uint8_t>* out) {
  fwUniqueId id;
  if (api().getUniqueId(&id) != fwSuccess) {
    return Status(fwSystemError, std::string("host-emulated NCCL: ") + api().lastError());
  }
  out->assign(id.internal, id.internal + sizeof(id.internal));
  return Status::ok();
}

Status emulatedCreate(const NativeInitArgs& init, std::unique_ptr<NativeCollectives>* out) {
  fwUniqueId id;
  if (init.uniqueId.size() != sizeof(id.internal)) return Status(fwInvalidArgument, "host-emulated NCCL: bad id");
  std::memcpy(id.internal, init.uniqueId.data(), sizeof(id.internal));
  fwComm_t comm = nullptr;
  if (api().initRank(&comm, init.size, id, init.rank) != fwSuccess) {
    return Status(fwSystemError, std::string("host-emulated NCCL: ") + api().lastError());
  }
  *out = std::make_unique<EmulatedNative>(comm, init.rank, init.size, streamQueue());
  return Status::ok();
}

const NativeCollectivesEntry kEntry{emulatedAvailable, emulatedSupports, emulatedMakeUniqueId, emulatedCreate};

}  // namespace

const NativeCollectivesEntry* emulatedNativeCollectives(EmulatedStreamQueue queue) {
  streamQueue() = std::move(queue);
  return &kEntry;
}

}  // namespace fairway
