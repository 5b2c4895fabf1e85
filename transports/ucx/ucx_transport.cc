// UCX transport: UCP tag send/recv between the ranks of one communicator.
//
// One UCP context and worker per communicator, so communicators never see
// each other's tags. UCX picks the wires (shared memory, cma, tcp, verbs)
// unless UCX_TLS says otherwise. Requests live in UCX's own request pool
// (request_size below), so the steady state allocates nothing.
#include <dlfcn.h>
#include <ucp/api/ucp.h>
#include <ucs/config/global_opts.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "core/environment.h"
#include "core/log.h"
#include "transports/transport.h"
#include "transports/ucx/ucx_version.h"

namespace fairway {
namespace {

// Lives in the memory UCX reserves in front of each request.
constexpr size_t kNotARecv = ~size_t{0};
constexpr const char* kDefaultRendezvousThreshold = "256k";

struct UcxRequest {
  bool completed;
  ucs_status_t status;
  size_t receivedBytes;
  // A receive's posted size: a different incoming size means the peers disagree.
  size_t expectedBytes;
};

void initRequest(void* request) {
  auto* r = static_cast<UcxRequest*>(request);
  r->completed = false;
  r->status = UCS_OK;
  r->receivedBytes = 0;
  r->expectedBytes = kNotARecv;
}

void onSendComplete(void* request, ucs_status_t status, void*) {
  auto* r = static_cast<UcxRequest*>(request);
  r->status = status;
  r->completed = true;
}

void onRecvComplete(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void*) {
  auto* r = static_cast<UcxRequest*>(request);
  r->status = status;
  r->receivedBytes = (status == UCS_OK) ? info->length : 0;
  r->completed = true;
}

Status ucxError(const char* what, ucs_status_t status) {
  return Status(fwTransportError, std::string("ucx: ") + what + ": " + ucs_status_string(status));
}

class UcxTransport;

struct PeerErrorContext {
  UcxTransport* transport;
  int peer;
};

class UcxTransport final : public Transport {
 public:
  explicit UcxTransport(const TransportInitArgs& args)
      : rank_(args.rank), size_(args.size), timeoutMs_(args.timeoutMs), networkOnly_(args.networkOnly),
        netDevice_(args.netDevice), peerErrors_(args.size) {
    capabilities_.hostMemory = true;
  }

  ~UcxTransport() override {
    disconnect(true);
    if (address_ != nullptr) ucp_worker_release_address(worker_, address_);
    if (worker_ != nullptr) ucp_worker_destroy(worker_);
    if (context_ != nullptr) ucp_cleanup(context_);
  }

  Status init() {
    ucp_config_t* config = nullptr;
    ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
    if (st != UCS_OK) return ucxError("reading UCX configuration", st);
    // Below this size messages go eager: no rendezvous handshake, which on
    // shared cores costs a context switch per message. It equals the ring's
    // default segment (FAIRWAY_SEGMENT_BYTES, 256 KiB), so full segments of
    // large buffers still move zero-copy (CMA). UCX_RNDV_THRESH wins if set.
    if (environmentValue("UCX_RNDV_THRESH") == nullptr) {
      st = ucp_config_modify(config, "RNDV_THRESH", kDefaultRendezvousThreshold);
      if (st != UCS_OK) FW_LOG(Warn, Transport, "ucx: cannot set RNDV_THRESH: %s", ucs_status_string(st));
    }
    FW_RETURN_IF_ERROR(restrictToNetwork(config));

    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE |
                        UCP_PARAM_FIELD_REQUEST_INIT | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS |
                        UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    params.request_size = sizeof(UcxRequest);
    params.request_init = initRequest;
    params.estimated_num_eps = static_cast<size_t>(size_);
    params.mt_workers_shared = 0;
    st = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    if (st != UCS_OK) return Status(fwNotAvailable, std::string("ucx: ucp_init failed: ") + ucs_status_string(st));
    // Whether this UCX build reaches CUDA memory (Debian's does not).
    ucp_context_attr_t attr{};
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    if (ucp_context_query(context_, &attr) == UCS_OK) {
      capabilities_.cudaMemory = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
    }

    // The communicator serialises every call into the transport.
    ucp_worker_params_t wparams{};
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    st = ucp_worker_create(context_, &wparams, &worker_);
    if (st != UCS_OK) return ucxError("creating worker", st);
    st = ucp_worker_get_efd(worker_, &eventFd_);
    if (st != UCS_OK) return ucxError("getting the worker's event fd", st);
    st = ucp_worker_get_address(worker_, &address_, &addressLength_);
    if (st != UCS_OK) return ucxError("getting the worker address", st);
    return Status::ok();
  }

  const char* name() const override { return "ucx"; }
  const TransportCapabilities& capabilities() const override { return capabilities_; }

  std::vector<uint8_t> localAddress() const override {
    auto* bytes = reinterpret_cast<const uint8_t*>(address_);
    return std::vector<uint8_t>(bytes, bytes + addressLength_);
  }

  Status connect(const std::vector<std::vector<uint8_t>>& addresses, const std::vector<bool>& sameHost) override {
    if (static_cast<int>(addresses.size()) != size_) {
      return Status(fwInternalError, "ucx: connect got " + std::to_string(addresses.size()) + " addresses for " +
                                         std::to_string(size_) + " ranks");
    }
    endpoints_.assign(size_, nullptr);
    for (int peer = 0; peer < size_; ++peer) {
      if (addresses[peer].empty()) continue;
      peerErrors_[peer] = PeerErrorContext{this, peer};
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.address = reinterpret_cast<const ucp_address_t*>(addresses[peer].data());
      // Peer mode makes a dead remote peer fail our requests, but UCX then
      // refuses shared memory (posix, sysv have no failure handler); so
      // peers on this host go without it and are watched by pid instead.
      ep.err_mode = sameHost[peer] ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = onPeerError;
      ep.err_handler.arg = &peerErrors_[peer];
      ucs_status_t st = ucp_ep_create(worker_, &ep, &endpoints_[peer]);
      if (st != UCS_OK) return ucxError(("connecting to rank " + std::to_string(peer)).c_str(), st);
    }
    if (logEnabled(LogLevel::Trace, LogSubsys::Transport)) {
      for (ucp_ep_h ep : endpoints_) {
        if (ep != nullptr) ucp_ep_print_info(ep, stderr);
      }
    }
    return Status::ok();
  }

  // Every message names its memory. Host memory: UCX skips its detection,
  // and small messages keep the inline path. Device memory: never an
  // immediate completion either, so UCX cannot take the inline path, which
  // copies with the CPU. UCX (1.22) still detects a buffer named device
  // memory for itself; see turnOffMemoryTypeCache for why that detection is
  // right.
  static void sayMemoryType(MemoryType memory, ucp_request_param_t* param) {
    param->op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    if (memory == MemoryType::Cuda) {
      param->memory_type = UCS_MEMORY_TYPE_CUDA;
      param->op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    } else {
      param->memory_type = UCS_MEMORY_TYPE_HOST;
    }
  }

  Status isend(int peer, const void* buf, size_t bytes, uint64_t tag, MemoryType memory,
               RequestHandle* request) override {
    if (endpoints_[peer] == nullptr) {
      return Status(fwInternalError, "ucx: rank " + std::to_string(peer) + " is not connected on this transport");
    }
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
    param.cb.send = onSendComplete;
    sayMemoryType(memory, &param);
    ucs_status_ptr_t result = ucp_tag_send_nbx(endpoints_[peer], buf, bytes, tag, &param);
    if (UCS_PTR_IS_ERR(result)) return peerError("send to", peer, UCS_PTR_STATUS(result));
    *request = result;  // NULL when done at once
    return Status::ok();
  }

  Status irecv(int peer, void* buf, size_t bytes, uint64_t tag, uint64_t tagMask, MemoryType memory,
               RequestHandle* request) override {
    // Always a request (NO_IMM_CMPL): its callback reports the size that
    // arrived, which the immediate-completion path does not reliably do.
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = onRecvComplete;
    sayMemoryType(memory, &param);
    ucs_status_ptr_t result = ucp_tag_recv_nbx(worker_, buf, bytes, tag, tagMask, &param);
    if (UCS_PTR_IS_ERR(result)) return peerError("receive from", peer, UCS_PTR_STATUS(result));
    static_cast<UcxRequest*>(result)->expectedBytes = bytes;
    *request = result;
    return Status::ok();
  }

  Status test(RequestHandle request, bool* done) override {
    if (request == kCompleted) { *done = true; return Status::ok(); }
    auto* r = static_cast<UcxRequest*>(request);
    if (!r->completed) { *done = false; return Status::ok(); }
    *done = true;
    ucs_status_t status = r->status;
    size_t received = r->receivedBytes;
    size_t expected = r->expectedBytes;
    release(request);
    if (status == UCS_ERR_MESSAGE_TRUNCATED) {
      return Status(fwCollectiveMismatch, "a peer sent more than the " + std::to_string(expected) +
                                              " bytes expected: the ranks passed different counts");
    }
    if (status != UCS_OK) return ucxError("operation failed", status);
    if (expected != kNotARecv) return checkLength(received, expected);
    return Status::ok();
  }

  void cancel(RequestHandle request) override {
    if (request == kCompleted) return;
    auto* r = static_cast<UcxRequest*>(request);
    if (!r->completed) ucp_request_cancel(worker_, request);
    // A cancelled request completes later in progress; UCX frees it then.
    release(request);
  }

  bool progress() override { return ucp_worker_progress(worker_) != 0; }

  Status armEvents(bool* armed) override {
    ucs_status_t st = ucp_worker_arm(worker_);
    *armed = (st == UCS_OK);
    if (st == UCS_OK || st == UCS_ERR_BUSY) return Status::ok();
    return ucxError("arming the worker", st);
  }

  int eventFd() const override { return eventFd_; }

  bool probe(uint64_t tag, uint64_t tagMask, uint64_t* foundTag) override {
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h message = ucp_tag_probe_nb(worker_, tag, tagMask, 0, &info);
    if (message == nullptr) return false;
    *foundTag = info.sender_tag;
    return true;
  }

  int firstFailedPeer() const override { return failedPeer_.load(std::memory_order_relaxed); }

  void disconnect(bool force) override {
    if (endpoints_.empty()) return;
    std::vector<ucs_status_ptr_t> closing;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    for (ucp_ep_h ep : endpoints_) {
      if (ep == nullptr) continue;
      ucs_status_ptr_t request = ucp_ep_close_nbx(ep, &param);
      if (request != nullptr && !UCS_PTR_IS_ERR(request)) closing.push_back(request);
    }
    endpoints_.clear();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(force ? 1000 : timeoutMs_);
    for (ucs_status_ptr_t request : closing) {
      while (ucp_request_check_status(request) == UCS_INPROGRESS &&
             std::chrono::steady_clock::now() < deadline) {
        if (ucp_worker_progress(worker_) == 0) std::this_thread::yield();
      }
      if (ucp_request_check_status(request) == UCS_INPROGRESS) {
        FW_LOG(Warn, Transport, "ucx: rank %d: closing a connection did not finish in time", rank_);
        ucp_request_cancel(worker_, request);
      }
      ucp_request_free(request);
    }
  }

 private:
  // The inter-node level: UCX would pick shared memory for a
  // peer it finds on this host (emulated nodes), so those are excluded, and
  // the chosen NIC is the only network device. UCX_TLS and UCX_NET_DEVICES
  // set by the user win.
  Status restrictToNetwork(ucp_config_t* config) {
    if (networkOnly_ && environmentValue("UCX_TLS") == nullptr) {
      ucs_status_t st = ucp_config_modify(config, "TLS", "^sm,self");
      if (st != UCS_OK) return ucxError("excluding shared memory from the inter-node transports", st);
    }
    if (!netDevice_.empty() && environmentValue("UCX_NET_DEVICES") == nullptr) {
      ucs_status_t st = ucp_config_modify(config, "NET_DEVICES", netDevice_.c_str());
      if (st != UCS_OK) return ucxError(("selecting network device " + netDevice_).c_str(), st);
    }
    return Status::ok();
  }

  void release(RequestHandle request) {
    initRequest(request);  // UCX runs request_init only when it first allocates
    ucp_request_free(request);
  }

  static Status checkLength(size_t received, size_t expected) {
    if (received == expected) return Status::ok();
    return Status(fwCollectiveMismatch, "a peer sent " + std::to_string(received) + " bytes where " +
                                            std::to_string(expected) +
                                            " were expected: the ranks passed different counts");
  }

  Status peerError(const char* what, int peer, ucs_status_t status) {
    return Status(fwRemoteError, std::string("ucx: ") + what + " rank " + std::to_string(peer) + " failed: " +
                                     ucs_status_string(status));
  }

  static void onPeerError(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* ctx = static_cast<PeerErrorContext*>(arg);
    int expected = -1;
    ctx->transport->failedPeer_.compare_exchange_strong(expected, ctx->peer);
    // Info, not Warn: a peer that closes first at teardown lands here too;
    // a real failure is reported by the communicator, naming the rank.
    FW_LOG(Info, Transport, "ucx: rank %d lost its connection to rank %d: %s", ctx->transport->rank_, ctx->peer,
           ucs_status_string(status));
  }

  int rank_;
  int size_;
  int64_t timeoutMs_;
  bool networkOnly_;
  std::string netDevice_;
  TransportCapabilities capabilities_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_address_t* address_ = nullptr;
  size_t addressLength_ = 0;
  int eventFd_ = -1;
  std::vector<ucp_ep_h> endpoints_;
  std::vector<PeerErrorContext> peerErrors_;
  std::atomic<int> failedPeer_{-1};
};

// The libucp this process loaded against the headers the plugin was built
// with; checked once, and logged at INFO with the library's path.
Status checkLoadedUcx() {
  static const Status verdict = [] {
    UcxVersion built{UCP_API_MAJOR, UCP_API_MINOR, 0, FAIRWAY_UCX_LIBRARY_DIR};
    UcxVersion loaded;
    ucp_get_version(&loaded.major, &loaded.minor, &loaded.release);
    Dl_info info{};
    loaded.where = dladdr(reinterpret_cast<void*>(&ucp_get_version), &info) != 0 && info.dli_fname != nullptr
                       ? info.dli_fname
                       : "path unknown";
    Status st = checkUcxVersion(built, loaded);
    if (st.isOk()) {
      FW_LOG(Info, Transport, "ucx: UCX %u.%u.%u from %s", loaded.major, loaded.minor, loaded.release,
             loaded.where.c_str());
    }
    return st;
  }();
  return verdict;
}

// UCX finds a buffer's memory type in a cache that its hooks on CUDA's
// allocation calls fill, and takes an address the cache lacks for host
// memory, even where the call named it device memory. The hooks miss the
// allocations of a CUDA runtime that reaches the driver through
// cuGetProcAddress (CUDA 12 on: torch's, Fairway's CUDA plugin), so UCX read
// such device buffers with the CPU (SIGSEGV) or handed them to tcp and CMA
// (EFAULT). With the cache off UCX asks CUDA about each buffer it is not told
// is host memory, which here means only device messages. Process-wide, once,
// before the first context; UCX_MEMTYPE_CACHE, where set, wins.
void turnOffMemoryTypeCache() {
  static const bool once = [] {
    if (const char* set = environmentValue("UCX_MEMTYPE_CACHE")) {
      FW_LOG(Info, Transport, "ucx: memory-type cache as UCX_MEMTYPE_CACHE=%s says", set);
      return true;
    }
    ucs_status_t st = ucs_global_opts_set_value("MEMTYPE_CACHE", "n");
    char now[16] = {};
    if (st == UCS_OK) st = ucs_global_opts_get_value("MEMTYPE_CACHE", now, sizeof(now));
    if (st != UCS_OK) {
      FW_LOG(Warn, Transport, "ucx: cannot turn the memory-type cache off (%s): device buffers that UCX's hooks "
             "did not see allocated will be taken for host memory; set UCX_MEMTYPE_CACHE=n", ucs_status_string(st));
    } else {
      FW_LOG(Info, Transport, "ucx: memory-type cache off (MEMTYPE_CACHE=%s; UCX_MEMTYPE_CACHE overrides): UCX asks "
             "CUDA what each device buffer is", now);
    }
    return true;
  }();
  (void)once;
}

Status createUcxTransport(const TransportInitArgs& args, std::unique_ptr<Transport>* out) {
  FW_RETURN_IF_ERROR(checkLoadedUcx());
  turnOffMemoryTypeCache();
  auto transport = std::make_unique<UcxTransport>(args);
  FW_RETURN_IF_ERROR(transport->init());
  *out = std::move(transport);
  return Status::ok();
}

const TransportPlugin kUcxPlugin{kTransportAbiVersion, "ucx", createUcxTransport, nullptr};

}  // namespace
}  // namespace fairway

extern "C" __attribute__((visibility("default"))) const fairway::TransportPlugin* fairwayTransportPlugin() {
  return &fairway::kUcxPlugin;
}
