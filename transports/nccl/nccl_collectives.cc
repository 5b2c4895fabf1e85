// NCCL behind the NativeCollectives interface: the collectives of one
// communicator on device memory, enqueued on the caller's stream. The
// unique id comes from rank 0 and travels over Fairway's own bootstrap.
#include <dlfcn.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>

#include "core/log.h"
#include "transports/native_collectives.h"
#include "transports/transport.h"

namespace fairway {
namespace {

Status ncclFailure(const char* what, ncclResult_t result, ncclComm_t comm = nullptr) {
  std::string message = std::string("nccl: ") + what + ": " + ncclGetErrorString(result);
  const char* detail = ncclGetLastError(comm);
  if (detail != nullptr && *detail != '\0') message += std::string(" (") + detail + ")";
  fwResult_t code = (result == ncclRemoteError) ? fwRemoteError
                    : (result == ncclInvalidArgument || result == ncclInvalidUsage) ? fwInvalidUsage
                                                                                     : fwTransportError;
  return Status(code, message);
}

// The version of the NCCL this process runs (it may be older than the
// headers: torch's own); fp8 came with 2.24.
int runningNcclVersion() {
  static const int version = [] {
    int v = 0;
    return ncclGetVersion(&v) == ncclSuccess ? v : 0;
  }();
  return version;
}
constexpr int kFirstNcclWithFp8 = 22400;

bool toNcclType(fwDataType_t type, ncclDataType_t* out) {
  switch (type) {
#if NCCL_VERSION_CODE >= 22400
    case fwFloat8e4m3: *out = ncclFloat8e4m3; return runningNcclVersion() >= kFirstNcclWithFp8;
    case fwFloat8e5m2: *out = ncclFloat8e5m2; return runningNcclVersion() >= kFirstNcclWithFp8;
#endif
    case fwInt8: *out = ncclInt8; return true;
    case fwUint8: *out = ncclUint8; return true;
    case fwInt32: *out = ncclInt32; return true;
    case fwUint32: *out = ncclUint32; return true;
    case fwInt64: *out = ncclInt64; return true;
    case fwUint64: *out = ncclUint64; return true;
    case fwFloat16: *out = ncclFloat16; return true;
    case fwBfloat16: *out = ncclBfloat16; return true;
    case fwFloat32: *out = ncclFloat32; return true;
    case fwFloat64: *out = ncclFloat64; return true;
    default: return false;
  }
}

bool toNcclOp(fwRedOp_t op, ncclRedOp_t* out) {
  switch (op) {
    case fwSum: *out = ncclSum; return true;
    case fwProd: *out = ncclProd; return true;
    case fwMax: *out = ncclMax; return true;
    case fwMin: *out = ncclMin; return true;
    case fwAvg: *out = ncclAvg; return true;
    default: return false;  // NCCL has no bitwise reductions
  }
}

class NcclCollectives final : public NativeCollectives {
 public:
  explicit NcclCollectives(ncclComm_t comm) : comm_(comm) {}
  // Finalizing waits for enqueued work, which never ends if a peer died;
  // a communicator that saw an error is aborted instead.
  ~NcclCollectives() override {
    if (comm_ == nullptr) return;
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &async) != ncclSuccess || async != ncclSuccess ||
        ncclCommFinalize(comm_) != ncclSuccess) {
      (void)ncclCommAbort(comm_);
      return;
    }
    (void)ncclCommDestroy(comm_);
  }

  Status allReduce(const void* send, void* recv, size_t count, fwDataType_t datatype, fwRedOp_t op,
                   void* stream) override {
    ncclDataType_t t;
    ncclRedOp_t o;
    if (!toNcclType(datatype, &t) || !toNcclOp(op, &o)) return unsupported();
    return check("ncclAllReduce", ncclAllReduce(send, recv, count, t, o, comm_, cudaStreamOf(stream)));
  }
  Status reduceScatter(const void* send, void* recv, size_t recvCount, fwDataType_t datatype, fwRedOp_t op,
                       void* stream) override {
    ncclDataType_t t;
    ncclRedOp_t o;
    if (!toNcclType(datatype, &t) || !toNcclOp(op, &o)) return unsupported();
    return check("ncclReduceScatter", ncclReduceScatter(send, recv, recvCount, t, o, comm_, cudaStreamOf(stream)));
  }
  Status allGather(const void* send, void* recv, size_t sendCount, fwDataType_t datatype, void* stream) override {
    ncclDataType_t t;
    if (!toNcclType(datatype, &t)) return unsupported();
    return check("ncclAllGather", ncclAllGather(send, recv, sendCount, t, comm_, cudaStreamOf(stream)));
  }
  Status broadcast(const void* send, void* recv, size_t count, fwDataType_t datatype, int root,
                   void* stream) override {
    ncclDataType_t t;
    if (!toNcclType(datatype, &t)) return unsupported();
    return check("ncclBroadcast", ncclBroadcast(send, recv, count, t, root, comm_, cudaStreamOf(stream)));
  }
  Status reduce(const void* send, void* recv, size_t count, fwDataType_t datatype, fwRedOp_t op, int root,
                void* stream) override {
    ncclDataType_t t;
    ncclRedOp_t o;
    if (!toNcclType(datatype, &t) || !toNcclOp(op, &o)) return unsupported();
    return check("ncclReduce", ncclReduce(send, recv, count, t, o, root, comm_, cudaStreamOf(stream)));
  }
  Status send(const void* buf, size_t count, fwDataType_t datatype, int peer, void* stream) override {
    ncclDataType_t t;
    if (!toNcclType(datatype, &t)) return unsupported();
    return check("ncclSend", ncclSend(buf, count, t, peer, comm_, cudaStreamOf(stream)));
  }
  Status recv(void* buf, size_t count, fwDataType_t datatype, int peer, void* stream) override {
    ncclDataType_t t;
    if (!toNcclType(datatype, &t)) return unsupported();
    return check("ncclRecv", ncclRecv(buf, count, t, peer, comm_, cudaStreamOf(stream)));
  }

  Status asyncError() override {
    ncclResult_t async = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm_, &async);
    if (r != ncclSuccess) return ncclFailure("ncclCommGetAsyncError", r, comm_);
    return async == ncclSuccess ? Status::ok() : ncclFailure("enqueued work failed", async, comm_);
  }

  void abort() override {
    if (comm_ != nullptr) (void)ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  bool canShrink() const override { return comm_ != nullptr && shrinkFunction() != nullptr; }

  Status shrink(const std::vector<int>& exclude, bool abortInFlight,
                std::unique_ptr<NativeCollectives>* out) override {
    out->reset();
    const ShrinkFunction shrinkComm = shrinkFunction();
    if (comm_ == nullptr || shrinkComm == nullptr) {
      return Status(fwInternalError, "nccl: ncclCommShrink is not in the NCCL this process runs");
    }
    std::vector<int> ranks(exclude);
    ncclComm_t shrunk = nullptr;
    const ncclResult_t r = shrinkComm(comm_, ranks.data(), static_cast<int>(ranks.size()), &shrunk, nullptr,
                                      abortInFlight ? NCCL_SHRINK_ABORT : NCCL_SHRINK_DEFAULT);
    if (r != ncclSuccess) return ncclFailure("ncclCommShrink", r, comm_);
    *out = std::make_unique<NcclCollectives>(shrunk);
    return Status::ok();
  }

 private:
  // ncclCommShrink from the NCCL library ncclGetVersion came from (the one
  // the process runs, perhaps torch's), or null where that NCCL predates
  // it (2.27): looked up at run time, so an older NCCL still loads.
  using ShrinkFunction = ncclResult_t (*)(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int);
  static ShrinkFunction shrinkFunction() {
    static const ShrinkFunction found = [] {
      Dl_info info{};
      if (dladdr(reinterpret_cast<void*>(&ncclGetVersion), &info) == 0 || info.dli_fname == nullptr) return ShrinkFunction{};
      void* library = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
      return library == nullptr ? ShrinkFunction{} : reinterpret_cast<ShrinkFunction>(dlsym(library, "ncclCommShrink"));
    }();
    return found;
  }

  static cudaStream_t cudaStreamOf(void* stream) { return static_cast<cudaStream_t>(stream); }
  Status check(const char* what, ncclResult_t r) { return r == ncclSuccess ? Status::ok() : ncclFailure(what, r, comm_); }
  static Status unsupported() { return Status(fwInternalError, "nccl: type or op not native; the caller must check"); }

  ncclComm_t comm_;
};

bool ncclSupports(fwDataType_t datatype, fwRedOp_t op) {
  ncclDataType_t t;
  ncclRedOp_t o;
  return toNcclType(datatype, &t) && toNcclOp(op, &o);
}

Status ncclAvailable() {
  int version = 0;
  ncclResult_t r = ncclGetVersion(&version);
  if (r != ncclSuccess) return ncclFailure("ncclGetVersion", r);
  // libnccl.so.2 is a dependency by soname: where the process already
  // has one (torch's, from its nvidia-nccl wheel), the loader binds to it,
  // so one NCCL serves both. Which one is logged.
  Dl_info info{};
  const char* where = dladdr(reinterpret_cast<void*>(&ncclGetVersion), &info) != 0 && info.dli_fname != nullptr
                          ? info.dli_fname
                          : "path unknown";
  FW_LOG(Info, Init, "nccl: NCCL %d.%d.%d from %s", version / 10000, version / 100 % 100, version % 100, where);
  return Status::ok();
}

Status ncclMakeUniqueId(std::vector<uint8_t>* out) {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return ncclFailure("ncclGetUniqueId", r);
  out->assign(reinterpret_cast<const uint8_t*>(id.internal), reinterpret_cast<const uint8_t*>(id.internal) + sizeof(id.internal));
  return Status::ok();
}

Status ncclCreate(const NativeInitArgs& args, std::unique_ptr<NativeCollectives>* out) {
  ncclUniqueId id;
  if (args.uniqueId.size() != sizeof(id.internal)) {
    return Status(fwInternalError, "nccl: unique id of " + std::to_string(args.uniqueId.size()) + " bytes");
  }
  std::memcpy(id.internal, args.uniqueId.data(), sizeof(id.internal));
  cudaError_t e = cudaSetDevice(args.device);
  if (e != cudaSuccess) return Status(fwSystemError, std::string("cuda: cudaSetDevice: ") + cudaGetErrorString(e));
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRank(&comm, args.size, id, args.rank);
  if (r != ncclSuccess) return ncclFailure("ncclCommInitRank", r);
  *out = std::make_unique<NcclCollectives>(comm);
  return Status::ok();
}

const NativeCollectivesEntry kNcclEntry{ncclAvailable, ncclSupports, ncclMakeUniqueId, ncclCreate};
const TransportPlugin kNcclPlugin{kTransportAbiVersion, "nccl", nullptr, &kNcclEntry};

}  // namespace
}  // namespace fairway

extern "C" __attribute__((visibility("default"))) const fairway::TransportPlugin* fairwayTransportPlugin() {
  return &fairway::kNcclPlugin;
}
