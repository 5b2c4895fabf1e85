#include "fairway_backend.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#ifdef FAIRWAY_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace fairway_torch {
namespace {

constexpr const char* kUniqueIdKey = "fairway/unique_id";
constexpr const char* kUniqueIdFailed = "fairway/unique_id_failed";

std::string lastMessage(fwResult_t result) {
  const char* detail = fwGetLastErrorMessage();
  return detail != nullptr && detail[0] != '\0' ? detail : fwGetErrorString(result);
}

// The Fairway type of a tensor. bool travels as bytes where the operation
// allows it (data movement, and the reductions below that keep 0/1).
fwDataType_t fwTypeOf(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return fwFloat32;
    case at::kDouble: return fwFloat64;
    case at::kHalf: return fwFloat16;
    case at::kBFloat16: return fwBfloat16;
    case at::kChar: return fwInt8;
    case at::kByte: return fwUint8;
    case at::kBool: return fwUint8;
    case at::kInt: return fwInt32;
    case at::kLong: return fwInt64;
    case at::kFloat8_e4m3fn: return fwFloat8e4m3;
    case at::kFloat8_e5m2: return fwFloat8e5m2;
    default: break;
  }
  TORCH_CHECK_VALUE(false, "fairway: dtype ", t.scalar_type(),
                    " is not supported (float32, float64, float16, bfloat16, float8_e4m3fn, float8_e5m2, int8, "
                    "uint8, int32, int64, bool)");
}

fwRedOp_t fwOpOf(const c10d::ReduceOp& op, const at::Tensor& t) {
  const bool isBool = t.scalar_type() == at::kBool;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return isBool ? fwMax : fwSum;  // logical or
    case c10d::ReduceOp::PRODUCT: return isBool ? fwMin : fwProd;  // logical and
    case c10d::ReduceOp::MIN: return fwMin;
    case c10d::ReduceOp::MAX: return fwMax;
    case c10d::ReduceOp::BAND: return fwBand;
    case c10d::ReduceOp::BOR: return fwBor;
    case c10d::ReduceOp::BXOR: return fwBxor;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK_VALUE(!isBool, "fairway: ReduceOp.AVG has no meaning for bool tensors");
      return fwAvg;
    default: break;
  }
  TORCH_CHECK_VALUE(false, "fairway: reduce op ", static_cast<int>(op.op_),
                    " is not supported (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR)");
}

void checkTensor(const at::Tensor& t, const char* what) {
  TORCH_CHECK_VALUE(t.layout() == at::kStrided, "fairway: ", what, " takes dense tensors, not ", t.layout());
  TORCH_CHECK_VALUE(t.is_contiguous(), "fairway: ", what, " takes contiguous tensors (call .contiguous() first)");
  TORCH_CHECK_VALUE(t.is_cpu() || t.is_cuda(), "fairway: ", what, " takes cpu or cuda tensors, not ", t.device());
  fwTypeOf(t);
}

void checkSame(const at::Tensor& a, const at::Tensor& b, const char* what) {
  TORCH_CHECK_VALUE(a.scalar_type() == b.scalar_type(), "fairway: ", what, ": tensors of dtypes ", a.scalar_type(),
                    " and ", b.scalar_type(), " in one call");
  TORCH_CHECK_VALUE(a.device() == b.device(), "fairway: ", what, ": tensors on ", a.device(), " and ", b.device(),
                    " in one call");
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "fairway: ", what, " takes one tensor per call, got ", tensors.size());
  checkTensor(tensors[0], what);
  return tensors[0];
}

size_t count(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }

// Copies between a collective's temporaries and the caller's tensors (same
// dtype, same number of elements). On the CPU a plain memcpy on the calling
// thread: torch's copy_ and cat run on its intra-op thread pool, and when
// every rank of a node copies at the same moment, as they do right after a
// collective, those threads oversubscribe the cores and their barrier waits
// out scheduler time slices (2 ranks on 2 cores, 2 x 4 MiB: copy_ 14.5 ms
// median against 0.4 ms for one process alone). CUDA tensors keep copy_,
// which orders the copy on the current stream.
void copyInto(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.is_cpu() && src.is_cpu() && dst.is_contiguous() && src.is_contiguous()) {
    std::memcpy(dst.data_ptr(), src.data_ptr(), src.nbytes());
  } else {
    dst.copy_(src.view(dst.sizes()));
  }
}

// Flattens same-typed tensors into one buffer from `scratch` (one
// collective instead of many).
at::Tensor flatten(const std::vector<at::Tensor>& tensors, ScratchPool& scratch) {
  int64_t total = 0;
  for (const at::Tensor& t : tensors) total += t.numel();
  at::Tensor flat = scratch.take(total, tensors.at(0).options());
  int64_t offset = 0;
  for (const at::Tensor& t : tensors) {
    copyInto(flat.narrow(0, offset, t.numel()), t.reshape({-1}));
    offset += t.numel();
  }
  return flat;
}

void unflattenInto(const at::Tensor& flat, std::vector<at::Tensor>& tensors) {
  int64_t offset = 0;
  for (at::Tensor& t : tensors) {
    copyInto(t, flat.narrow(0, offset, t.numel()));
    offset += t.numel();
  }
}

// A call moves contiguous buffers. A tensor it reads that is not one (a
// view, such as a matrix's column) goes as a contiguous copy; one it
// writes is written through a contiguous temporary, listed in copyOut with
// the caller's tensor to copy it to once the call is done.
using CopyOutList = std::vector<std::pair<at::Tensor, at::Tensor>>;  // (written, caller's tensor)
at::Tensor readable(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }
at::Tensor writable(const at::Tensor& t, CopyOutList* copyOut) {
  if (t.is_contiguous()) return t;
  at::Tensor staged = at::empty(t.sizes(), t.options());
  copyOut->emplace_back(staged, t);
  return staged;
}
void copyOutAll(const CopyOutList& copyOut) {
  for (const auto& [written, caller] : copyOut) caller.copy_(written);
}

// torch's name for an operation, the second half of its profiler event's
// name ("fairway:all_reduce"), as torch's own backends name theirs.
const char* operationName(c10d::OpType type) {
  switch (type) {
    case c10d::OpType::BROADCAST: return "broadcast";
    case c10d::OpType::ALLREDUCE: return "all_reduce";
    case c10d::OpType::ALLREDUCE_COALESCED: return "all_reduce";  // named as the call it coalesces
    case c10d::OpType::REDUCE: return "reduce";
    case c10d::OpType::ALLGATHER: return "all_gather";
    case c10d::OpType::_ALLGATHER_BASE: return "all_gather_into_tensor";
    case c10d::OpType::ALLGATHER_COALESCED: return "all_gather";
    case c10d::OpType::GATHER: return "gather";
    case c10d::OpType::SCATTER: return "scatter";
    case c10d::OpType::REDUCE_SCATTER: return "reduce_scatter";
    case c10d::OpType::_REDUCE_SCATTER_BASE: return "reduce_scatter_tensor";
    case c10d::OpType::ALLTOALL_BASE:
    case c10d::OpType::ALLTOALL: return "all_to_all";
    case c10d::OpType::SEND: return "send";
    case c10d::OpType::RECV: return "recv";
    case c10d::OpType::RECVANYSOURCE: return "recvAnySource";
    case c10d::OpType::BARRIER: return "barrier";
    case c10d::OpType::COALESCED: return "coalesced";
    default: return "operation";
  }
}

}  // namespace

void throwFairwayError(fwResult_t result, const std::string& what) {
  // torch and its users recognise a timeout by the words " Timed out "
  // (torch's suite matches " (Timed out|closed|timeout) ").
  const char* kind = result == fwTimeout ? " Timed out waiting for its peers: " : " ";
  TORCH_CHECK_WITH(DistBackendError, false, "fairway: ", what, " failed:", kind, lastMessage(result), " (",
                   fwGetErrorString(result), ")");
}

// ---- Work ----

FairwayWork::FairwayWork(const char* title, c10d::OpType type, const std::vector<at::Tensor>& inputs,
                         std::vector<at::Tensor> outputs, c10::intrusive_ptr<c10::ivalue::Future> future,
                         std::chrono::milliseconds timeout)
    : c10d::Work(-1, type, title, inputs),
      outputs_(std::move(outputs)),
      future_(std::move(future)),
      timeout_(timeout) {}

int FairwayWork::sourceRank() const {
  if (!source_) return c10d::Work::sourceRank();  // torch's error: not a receive from any source
  return *source_;
}

bool FairwayWork::isCompleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  return finished_;
}

bool FairwayWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return finished_ && !error_;
}

std::exception_ptr FairwayWork::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void FairwayWork::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
    error_ = error;
    finishHere_ = nullptr;
  }
  if (recordFunctionEndCallback_) {  // the profiler's event ends here
    recordFunctionEndCallback_();
    recordFunctionEndCallback_ = nullptr;
  }
  done_.notify_all();
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

void FairwayWork::finishOnWait(std::function<void()> finishHere) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!finished_) finishHere_ = std::move(finishHere);
}

// Fairway bounds every operation by the group's timeout, so the default
// wait ends; a caller's shorter timeout is honoured here.
bool FairwayWork::wait(std::chrono::milliseconds timeout) {
  if (timeout == kNoTimeout) {  // Fairway's own wait is bounded by the group's timeout
    std::function<void()> finishHere;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!finished_) finishHere = finishHere_;
    }
    if (finishHere) finishHere();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  const auto limit = timeout == kNoTimeout ? timeout_ + std::chrono::seconds(60) : timeout;
  if (!done_.wait_for(lock, limit, [&] { return finished_; })) {
    TORCH_CHECK_WITH(DistBackendError, false, "fairway: operation did not complete within ", limit.count(), " ms");
  }
  if (error_) std::rethrow_exception(error_);
  lock.unlock();
  // CUDA: makes the current stream wait for the operation's stream.
  future_->wait();
  return true;
}

// The profiler keeps the pointer it is given: each title is made once, when
// the backend is made, and kept for the life of the process (a handful:
// names x operations); a call only looks its title up.
void FairwayBackend::makeTitles() {
  static std::mutex mutex;
  static std::set<std::string> interned;
  std::lock_guard<std::mutex> lock(mutex);
  for (size_t i = 0; i < titles_.size(); ++i) {
    const auto type = static_cast<c10d::OpType>(i);
    titles_[i] = interned.insert(name_ + ":" + operationName(type)).first->c_str();
  }
  otherTitle_ = interned.insert(name_ + ":operation").first->c_str();
}

const char* FairwayBackend::title(c10d::OpType type) const {
  const auto index = static_cast<size_t>(type);
  return index < titles_.size() ? titles_[index] : otherTitle_;
}

FairwayBackend::Finish FairwayBackend::copyOutAndRelease(at::Tensor flat, std::vector<at::Tensor> outputs,
                                                          std::vector<at::Tensor> temporaries) const {
  return [flat, outputs, temporaries, scratch = scratch_]() mutable {
    unflattenInto(flat, outputs);
    scratch->give(flat);
    for (const at::Tensor& t : temporaries) scratch->give(t);
  };
}

void FairwayBackend::checkRoot(int64_t root, const char* what) const {
  TORCH_CHECK_VALUE(root >= 0 && root < getSize(), "fairway: ", what, " root ", root,
                    " is not a rank of this group of ", getSize());
}

// ---- Backend: creation ----

FairwayBackend::FairwayBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                               std::chrono::milliseconds timeout, std::string name)
    : c10d::Backend(rank, size), timeout_(timeout), store_(store), name_(std::move(name)) {
  makeTitles();
  fwUniqueId id;
  if (rank == 0) {
    const fwResult_t made = fwGetUniqueId(&id);
    if (made != fwSuccess) {
      // The others wait for the id: tell them why it will not come.
      const std::string why = lastMessage(made);
      store->set(kUniqueIdFailed, std::vector<uint8_t>(why.begin(), why.end()));
      store->set(kUniqueIdKey, std::vector<uint8_t>());
      throwFairwayError(made, "making the unique id");
    }
    store->set(kUniqueIdKey, std::vector<uint8_t>(id.internal, id.internal + sizeof(id.internal)));
  } else {
    const std::vector<uint8_t> record = store->get(kUniqueIdKey);
    if (record.size() != sizeof(id.internal)) {
      std::string why = "rank 0 published no unique id";
      if (store->check({kUniqueIdFailed})) {
        const std::vector<uint8_t> text = store->get(kUniqueIdFailed);
        why = "rank 0 could not make the unique id: " + std::string(text.begin(), text.end());
      }
      TORCH_CHECK_WITH(DistBackendError, false, "fairway: ", why);
    }
    std::memcpy(id.internal, record.data(), record.size());
  }
  fwConfig_t config = FW_CONFIG_INITIALIZER;
  config.timeoutMs = std::max<long long>(1, timeout.count());
  const fwResult_t created = fwCommInitRankConfig(&comm_, size, id, rank, &config);
  if (created != fwSuccess) throwFairwayError(created, "creating the communicator of rank " + std::to_string(rank));
}

FairwayBackend::FairwayBackend(fwComm_t comm, int rank, int size, std::chrono::milliseconds timeout,
                               c10::intrusive_ptr<c10d::Store> store, std::string name)
    : c10d::Backend(rank, size), comm_(comm), timeout_(timeout), store_(std::move(store)), name_(std::move(name)) {
  makeTitles();
}

FairwayBackend::~FairwayBackend() {
  completions_.stop();
  if (comm_ != nullptr) fwCommDestroy(comm_);
}

void FairwayBackend::abort() {
  completions_.stop();
  if (comm_ != nullptr) fwCommAbort(comm_);
  comm_ = nullptr;
}

void FairwayBackend::shutdown() {
  completions_.stop();
  if (comm_ != nullptr) fwCommDestroy(comm_);
  comm_ = nullptr;
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::runHost(c10d::OpType type, const std::vector<at::Tensor>& inputs,
                                                       std::vector<at::Tensor> outputs,
                                                       const std::function<fwResult_t(fwRequest_t*)>& start,
                                                       Finish finish, const char* what, bool asyncOp) {
  TORCH_CHECK_WITH(DistBackendError, comm_ != nullptr, "fairway: ", what, " on a process group already shut down");
  auto work = makeWork(type, inputs, outputs);
  if (!asyncOp) {
    fwResult_t result;
    {
      std::lock_guard<std::mutex> lock(callMutex_);
      result = start(nullptr);  // the blocking form; Fairway orders it after the calls in flight
      if (result == fwSuccess && coalescing_) coalesced_.push_back(work);
    }
    if (result != fwSuccess) throwFairwayError(result, what);
    if (finish) finish();
    work->finish(nullptr);
    return work;
  }
  fwRequest_t request = nullptr;
  {
    std::lock_guard<std::mutex> lock(callMutex_);
    const fwResult_t posted = start(&request);
    if (posted != fwSuccess) throwFairwayError(posted, what);
    if (coalescing_) coalesced_.push_back(work);
    if (c10d::isP2POp(type)) {
      completions_.addAnyOrder({request}, work, std::move(finish), what);
    } else {
      completions_.addInOrder(request, work, std::move(finish), what);
    }
  }
  return work;
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::runExchange(c10d::OpType type, const char* what,
                                                           const Exchange& exchange,
                                                           const std::vector<at::Tensor>& inputs,
                                                           std::vector<at::Tensor> outputs, bool asyncOp) {
  TORCH_CHECK_WITH(DistBackendError, comm_ != nullptr, "fairway: ", what, " on a process group already shut down");
  ++collectives_;
  for (const auto& [from, to] : exchange.local) copyInto(to, from);
  // A gather's or scatter's list may hold views: every rank sends the same
  // messages whatever its tensors' layout.
  auto sends = exchange.sends;
  for (auto& [peer, t] : sends) t = readable(t);
  auto receives = exchange.receives;
  CopyOutList copyOut;
  for (auto& [peer, t] : receives) t = writable(t, &copyOut);
  // Run once the messages are done; holds the tensors until then.
  Finish finish = [sends, receives, copyOut]() { copyOutAll(copyOut); };
  auto work = makeWork(type, inputs, outputs);
  std::vector<fwRequest_t> requests;
  fwResult_t posted = fwSuccess;
  {
    std::lock_guard<std::mutex> lock(callMutex_);
    for (const auto& [peer, t] : receives) {
      if (posted != fwSuccess) break;
      requests.push_back(nullptr);
      posted = fwIrecvTagged(t.data_ptr(), count(t), fwTypeOf(t), peer, kExchangeTag, nullptr, comm_,
                             &requests.back());
    }
    for (const auto& [peer, t] : sends) {
      if (posted != fwSuccess) break;
      requests.push_back(nullptr);
      posted = fwIsendTagged(t.data_ptr(), count(t), fwTypeOf(t), peer, kExchangeTag, comm_, &requests.back());
    }
    if (posted != fwSuccess) requests.pop_back();  // the failed call made no request
    if (coalescing_) coalesced_.push_back(work);
    if (posted == fwSuccess && asyncOp) {
      completions_.addAnyOrder(std::move(requests), work, std::move(finish), what);
      return work;
    }
  }
  // Blocking, or a post failed (the communicator is broken: the messages
  // posted before fail at once).
  fwResult_t result = posted;
  for (fwRequest_t request : requests) {
    const fwResult_t waited = fwWait(request);
    if (result == fwSuccess) result = waited;
  }
  if (result != fwSuccess) throwFairwayError(result, what);
  finish();
  work->finish(nullptr);
  return work;
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::runDevice(c10d::OpType type, const at::Device& device,
                                                         const std::vector<at::Tensor>& inputs,
                                                         std::vector<at::Tensor> outputs,
                                                         const std::function<fwResult_t(fwStream_t)>& enqueue,
                                                         const char* what) {
#ifdef FAIRWAY_TORCH_CUDA
  TORCH_CHECK_WITH(DistBackendError, comm_ != nullptr, "fairway: ", what, " on a process group already shut down");
  c10::cuda::CUDAGuard guard(device);
  // On the current stream: ordered after what the caller enqueued before,
  // and what it enqueues after sees the result (the tensors were made for
  // this stream, so the caching allocator needs no extra record).
  cudaStream_t stream = at::cuda::getCurrentCUDAStream(device.index()).stream();
  {
    std::lock_guard<std::mutex> lock(callMutex_);
    const fwResult_t enqueued = enqueue(stream);
    if (enqueued != fwSuccess) throwFairwayError(enqueued, what);
  }
  auto work = makeWork(type, inputs, outputs, device);
  work->finish(nullptr);  // the future records an event on the current stream
  std::lock_guard<std::mutex> lock(callMutex_);  // the region's list, as every caller sees it
  if (coalescing_) {
    coalesced_.push_back(work);
    coalescedDevice_ = device;
  }
  return work;
#else
  (void)type; (void)inputs; (void)outputs; (void)enqueue;
  TORCH_CHECK(false, "fairway: ", what, " on ", device,
              ": this build of the fairway extension has no CUDA support (torch without CUDA at build time)");
#endif
}

// Each operation below validates, then calls `launch` with one lambda that
// makes the Fairway call: with a request for host tensors (none: the
// blocking form), with the current stream for CUDA tensors.
// CUDA tensors: enqueued on the current stream, and `finish` (copies out
// of temporaries) enqueued right after it there. Host tensors: runHost.
c10::intrusive_ptr<c10d::Work> FairwayBackend::launch(c10d::OpType type, const at::Tensor& anyTensor,
                                                      std::vector<at::Tensor> outputs, const Call& call,
                                                      Finish finish, const char* what, bool asyncOp,
                                                      const std::vector<at::Tensor>& inputs) {
  if (!c10d::isP2POp(type)) ++collectives_;
  const std::vector<at::Tensor> recorded = inputs.empty() ? std::vector<at::Tensor>{anyTensor} : inputs;
  if (anyTensor.is_cuda()) {
    auto work = runDevice(type, anyTensor.device(), recorded, std::move(outputs),
                          [&](fwStream_t s) { return call(s, nullptr); }, what);
    if (finish) finish();
    return work;
  }
  return runHost(type, recorded, std::move(outputs), [&](fwRequest_t* r) { return call(nullptr, r); },
                 std::move(finish),
                 what, asyncOp);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                         const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(tensors, "broadcast");
  checkRoot(opts.rootRank, "broadcast");
  const int root = static_cast<int>(opts.rootRank);
  Call call = [&](fwStream_t s, fwRequest_t* r) {
    return r ? fwIbroadcast(t.data_ptr(), t.data_ptr(), count(t), fwTypeOf(t), root, comm_, r)
             : fwBroadcast(t.data_ptr(), t.data_ptr(), count(t), fwTypeOf(t), root, comm_, s);
  };
  return launch(c10d::OpType::BROADCAST, t, tensors, call, nullptr, "broadcast", opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::AllreduceOptions& opts) {
  if (tensors.size() == 1 && tensors[0].layout() == at::kSparse) return allreduceSparse(tensors[0], opts);
  const at::Tensor& t = single(tensors, "allreduce");
  const fwRedOp_t op = fwOpOf(opts.reduceOp, t);
  Call call = [&](fwStream_t s, fwRequest_t* r) {
    return r ? fwIallReduce(t.data_ptr(), t.data_ptr(), count(t), fwTypeOf(t), op, comm_, r)
             : fwAllReduce(t.data_ptr(), t.data_ptr(), count(t), fwTypeOf(t), op, comm_, s);
  };
  return launch(c10d::OpType::ALLREDUCE, t, tensors, call, nullptr, "allreduce", opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                   const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK_VALUE(!tensors.empty(), "fairway: allreduce_coalesced takes at least one tensor");
  for (const at::Tensor& t : tensors) {
    checkTensor(t, "allreduce_coalesced");
    checkSame(t, tensors[0], "allreduce_coalesced");
  }
  const fwRedOp_t op = fwOpOf(opts.reduceOp, tensors[0]);
  at::Tensor flat = flatten(tensors, *scratch_);
  Call call = [&](fwStream_t s, fwRequest_t* r) {
    return r ? fwIallReduce(flat.data_ptr(), flat.data_ptr(), count(flat), fwTypeOf(flat), op, comm_, r)
             : fwAllReduce(flat.data_ptr(), flat.data_ptr(), count(flat), fwTypeOf(flat), op, comm_, s);
  };
  auto out = tensors;
  Finish finish = copyOutAndRelease(flat, out);
  return launch(c10d::OpType::ALLREDUCE_COALESCED, flat, tensors, call, finish, "allreduce_coalesced",
                opts.asyncOp, tensors);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::reduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  checkRoot(opts.rootRank, "reduce");
  const fwRedOp_t op = fwOpOf(opts.reduceOp, t);
  const int root = static_cast<int>(opts.rootRank);
  // torch's reduce is in place on every rank; only the root's result is defined.
  Call call = [&](fwStream_t s, fwRequest_t* r) {
    return r ? fwIreduce(t.data_ptr(), t.data_ptr(), count(t), fwTypeOf(t), op, root, comm_, r)
             : fwReduce(t.data_ptr(), t.data_ptr(), count(t), fwTypeOf(t), op, root, comm_, s);
  };
  return launch(c10d::OpType::REDUCE, t, tensors, call, nullptr, "reduce", opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::all_gather_single(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& opts) {
  checkTensor(input, "all_gather_into_tensor");
  checkTensor(output, "all_gather_into_tensor");
  checkSame(input, output, "all_gather_into_tensor");
  TORCH_CHECK_VALUE(output.numel() == input.numel() * getSize(), "fairway: all_gather_into_tensor: output has ",
                    output.numel(), " elements, not ", getSize(), " x ", input.numel());
  Call call = [&](fwStream_t s, fwRequest_t* r) {
    return r ? fwIallGather(input.data_ptr(), output.data_ptr(), count(input), fwTypeOf(input), comm_, r)
             : fwAllGather(input.data_ptr(), output.data_ptr(), count(input), fwTypeOf(input), comm_, s);
  };
  return launch(c10d::OpType::_ALLGATHER_BASE, input, std::vector<at::Tensor>{output}, call,
                        [input]() {} /* alive until done */, "all_gather_into_tensor", opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::AllgatherOptions& opts) {
  const at::Tensor& in = single(inputs, "all_gather");
  TORCH_CHECK_VALUE(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                    "fairway: all_gather takes one list of ", getSize(), " output tensors");
  for (const at::Tensor& o : outputs[0]) {
    checkSame(o, in, "all_gather");
    TORCH_CHECK_VALUE(o.numel() == in.numel(), "fairway: all_gather: an output has ", o.numel(),
                      " elements, the input ", in.numel());
  }
  at::Tensor input = in;
  if (!in.is_cuda()) {
    // Each rank's block goes straight into its output tensor (Fairway's
    // list form): no gathered buffer to copy out of.
    CopyOutList copyOut;
    std::vector<at::Tensor> targets;
    std::vector<void*> blocks;
    for (const at::Tensor& o : outputs[0]) {
      targets.push_back(writable(o, &copyOut));
      blocks.push_back(targets.back().data_ptr());
    }
    Call call = [&](fwStream_t s, fwRequest_t* r) {
      return r ? fwIallGatherList(input.data_ptr(), blocks.data(), count(input), fwTypeOf(input), comm_, r)
               : fwAllGatherList(input.data_ptr(), blocks.data(), count(input), fwTypeOf(input), comm_, s);
    };
    Finish finish = [input, targets, copyOut]() { copyOutAll(copyOut); };  // the tensors alive until done
    return launch(c10d::OpType::ALLGATHER, in, outputs[0], call, finish, "all_gather", opts.asyncOp);
  }
  at::Tensor flat = scratch_->take(static_cast<int64_t>(in.numel()) * getSize(), in.options());
  Call call = [&](fwStream_t s, fwRequest_t* r) {
    return r ? fwIallGather(input.data_ptr(), flat.data_ptr(), count(input), fwTypeOf(input), comm_, r)
             : fwAllGather(input.data_ptr(), flat.data_ptr(), count(input), fwTypeOf(input), comm_, s);
  };
  auto out = outputs[0];
  Finish finish = [input, copyOut = copyOutAndRelease(flat, out)]() { copyOut(); };  // input alive until done
  return launch(c10d::OpType::ALLGATHER, in, outputs[0], call, finish, "all_gather", opts.asyncOp);
}

// torch's all_gather_coalesced: outputLists[r] is rank r's list, one tensor
// per input (as gloo takes it). One allgather of the packed inputs; rank r's
// block holds its every input, copied out once the data is in place.
c10::intrusive_ptr<c10d::Work> FairwayBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(!inputs.empty(), "fairway: all_gather_coalesced: no input tensors");
  TORCH_CHECK_VALUE(static_cast<int>(outputLists.size()) == getSize(), "fairway: all_gather_coalesced: ",
                    outputLists.size(), " output lists for a group of ", getSize(), " (one list per rank)");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(inputs[i], "all_gather_coalesced");
    checkSame(inputs[i], inputs[0], "all_gather_coalesced");
  }
  for (int r = 0; r < getSize(); ++r) {
    TORCH_CHECK_VALUE(outputLists[r].size() == inputs.size(), "fairway: all_gather_coalesced: rank ", r,
                      "'s output list holds ", outputLists[r].size(), " tensors for ", inputs.size(), " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      checkSame(outputLists[r][i], inputs[0], "all_gather_coalesced");
      TORCH_CHECK_VALUE(outputLists[r][i].numel() == inputs[i].numel(), "fairway: all_gather_coalesced: output ",
                        i, " of rank ", r, " has ", outputLists[r][i].numel(), " elements, input ", i, " has ",
                        inputs[i].numel());
    }
  }
  at::Tensor packed = flatten(inputs, *scratch_);
  at::Tensor gathered = scratch_->take(packed.numel() * getSize(), packed.options());
  Call call = [&](fwStream_t s, fwRequest_t* r) {
    return r ? fwIallGather(packed.data_ptr(), gathered.data_ptr(), count(packed), fwTypeOf(packed), comm_, r)
             : fwAllGather(packed.data_ptr(), gathered.data_ptr(), count(packed), fwTypeOf(packed), comm_, s);
  };
  std::vector<at::Tensor> flatOutputs;
  for (const auto& list : outputLists) flatOutputs.insert(flatOutputs.end(), list.begin(), list.end());
  auto out = flatOutputs;  // rank by rank, input by input: the order of `gathered`
  Finish finish = copyOutAndRelease(gathered, out, {packed});
  return launch(c10d::OpType::ALLGATHER_COALESCED, packed, flatOutputs, call, finish, "all_gather_coalesced",
                opts.asyncOp, inputs);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::all_gather_single_coalesced(std::vector<at::Tensor>& outputs,
                                                                           std::vector<at::Tensor>& inputs,
                                                                           const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size() && !inputs.empty(), "fairway: all_gather_into_tensor_coalesced: ",
                    outputs.size(), " outputs for ", inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(inputs[i], "all_gather_into_tensor_coalesced");
    checkSame(inputs[i], inputs[0], "all_gather_into_tensor_coalesced");
    checkSame(outputs[i], inputs[0], "all_gather_into_tensor_coalesced");
    TORCH_CHECK_VALUE(outputs[i].numel() == inputs[i].numel() * getSize(),
                      "fairway: all_gather_into_tensor_coalesced: output ", i, " has ", outputs[i].numel(),
                      " elements, not ", getSize(), " x ", inputs[i].numel());
  }
  // One allgather of the packed inputs; rank r's block holds every input.
  at::Tensor packed = flatten(inputs, *scratch_);
  at::Tensor gathered = scratch_->take(packed.numel() * getSize(), packed.options());
  Call call = [&](fwStream_t s, fwRequest_t* r) {
    return r ? fwIallGather(packed.data_ptr(), gathered.data_ptr(), count(packed), fwTypeOf(packed), comm_, r)
             : fwAllGather(packed.data_ptr(), gathered.data_ptr(), count(packed), fwTypeOf(packed), comm_, s);
  };
  const int n = getSize();
  auto out = outputs;
  std::vector<int64_t> sizes;
  for (const at::Tensor& t : inputs) sizes.push_back(t.numel());
  const int64_t block = packed.numel();
  Finish finish = [packed, gathered, out, sizes, n, block, scratch = scratch_]() mutable {
    for (int r = 0; r < n; ++r) {
      int64_t offset = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        copyInto(out[i].view({-1}).narrow(0, r * sizes[i], sizes[i]), gathered.narrow(0, r * block + offset, sizes[i]));
        offset += sizes[i];
      }
    }
    scratch->give(packed);
    scratch->give(gathered);
  };
  return launch(c10d::OpType::COALESCED, packed, outputs, call, finish, "all_gather_into_tensor_coalesced",
                opts.asyncOp, inputs);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::GatherOptions& opts) {
  const at::Tensor& in = single(inputs, "gather");
  checkRoot(opts.rootRank, "gather");
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = getRank() == root;
  std::vector<at::Tensor> outList;
  if (isRoot) {
    TORCH_CHECK_VALUE(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                      "fairway: gather: the root takes one list of ", getSize(), " output tensors");
    outList = outputs[0];
    for (const at::Tensor& o : outList) {
      checkSame(o, in, "gather");
      TORCH_CHECK_VALUE(o.numel() == in.numel(), "fairway: gather: an output has ", o.numel(), " elements, the input ",
                        in.numel());
    }
  } else {
    TORCH_CHECK_VALUE(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                      "fairway: gather: only the root passes output tensors");
  }
  if (!in.is_cuda()) {
    Exchange exchange;
    if (!isRoot) exchange.sends.emplace_back(root, in);
    for (int r = 0; isRoot && r < getSize(); ++r) {
      if (r == root) {
        exchange.local.emplace_back(in, outList[r]);
      } else {
        exchange.receives.emplace_back(r, outList[r]);
      }
    }
    return runExchange(c10d::OpType::GATHER, "gather", exchange, inputs, outList, opts.asyncOp);
  }
  at::Tensor flat = isRoot ? scratch_->take(in.numel() * getSize(), in.options()) : at::Tensor();
  at::Tensor input = in;
  Call call = [&](fwStream_t s, fwRequest_t* r) {
    void* recv = isRoot ? flat.data_ptr() : nullptr;
    return r ? fwIgather(input.data_ptr(), recv, count(input), fwTypeOf(input), root, comm_, r)
             : fwGather(input.data_ptr(), recv, count(input), fwTypeOf(input), root, comm_, s);
  };
  Finish finish = [input]() {};  // alive until done
  if (isRoot) {
    finish = [input, copyOut = copyOutAndRelease(flat, outList)]() { copyOut(); };
  }
  return launch(c10d::OpType::GATHER, in, outList, call, finish, "gather", opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::scatter(std::vector<at::Tensor>& outputs,
                                                       std::vector<std::vector<at::Tensor>>& inputs,
                                                       const c10d::ScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "scatter");
  checkRoot(opts.rootRank, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = getRank() == root;
  if (isRoot) {
    TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                      "fairway: scatter: the root takes one list of ", getSize(), " input tensors");
    for (const at::Tensor& i : inputs[0]) {
      checkSame(i, out, "scatter");
      TORCH_CHECK_VALUE(i.numel() == out.numel(), "fairway: scatter: an input has ", i.numel(),
                        " elements, the output ", out.numel());
    }
  } else {
    TORCH_CHECK_VALUE(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                      "fairway: scatter: only the root passes input tensors");
  }
  if (!out.is_cuda()) {
    Exchange exchange;
    if (!isRoot) exchange.receives.emplace_back(root, out);
    for (int r = 0; isRoot && r < getSize(); ++r) {
      if (r == root) {
        exchange.local.emplace_back(inputs[0][r], out);
      } else {
        exchange.sends.emplace_back(r, inputs[0][r]);
      }
    }
    return runExchange(c10d::OpType::SCATTER, "scatter", exchange, isRoot ? inputs[0] : std::vector<at::Tensor>{},
                       outputs, opts.asyncOp);
  }
  at::Tensor flat = isRoot ? flatten(inputs[0], *scratch_) : at::Tensor();
  at::Tensor output = out;
  Call call = [&](fwStream_t s, fwRequest_t* r) {
    const void* send = isRoot ? flat.data_ptr() : nullptr;
    return r ? fwIscatter(send, output.data_ptr(), count(output), fwTypeOf(output), root, comm_, r)
             : fwScatter(send, output.data_ptr(), count(output), fwTypeOf(output), root, comm_, s);
  };
  Finish keep = [flat, scratch = scratch_]() { scratch->give(flat); };  // alive until the scatter is done
  return launch(c10d::OpType::SCATTER, output, outputs, call, keep, "scatter", opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::reduce_scatter_single(at::Tensor& output, at::Tensor& input,
                                                                     const c10d::ReduceScatterOptions& opts) {
  checkTensor(input, "reduce_scatter_tensor");
  checkTensor(output, "reduce_scatter_tensor");
  checkSame(input, output, "reduce_scatter_tensor");
  TORCH_CHECK_VALUE(input.numel() == output.numel() * getSize(), "fairway: reduce_scatter_tensor: input has ",
                    input.numel(), " elements, not ", getSize(), " x ", output.numel());
  return reduceScatterFlat(output, input, opts, nullptr, "reduce_scatter_tensor");
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::reduceScatterFlat(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::ReduceScatterOptions& opts,
                                                                 Finish after, const char* what) {
  const fwRedOp_t op = fwOpOf(opts.reduceOp, input);
  Call call = [&](fwStream_t s, fwRequest_t* r) {
    return r ? fwIreduceScatter(input.data_ptr(), output.data_ptr(), count(output), fwTypeOf(input), op, comm_, r)
             : fwReduceScatter(input.data_ptr(), output.data_ptr(), count(output), fwTypeOf(input), op, comm_, s);
  };
  // The input lives until the call is done.
  Finish finish = [input, after]() {
    if (after) after();
  };
  return launch(c10d::OpType::_REDUCE_SCATTER_BASE, input, std::vector<at::Tensor>{output}, call, finish, what,
                opts.asyncOp);
}

namespace {

// The descriptor of a compressed call; residual (if defined) must match the input.
fwCompression_t compressionOf(fwCompressKind_t kind, int blockSize, const at::Tensor& residual,
                              const at::Tensor& input, const char* what) {
  fwCompression_t c = FW_COMPRESSION_INITIALIZER;
  c.kind = kind;
  c.blockSize = blockSize;
  if (residual.defined()) {
    TORCH_CHECK_VALUE(residual.scalar_type() == at::kFloat && residual.is_contiguous(), "fairway: ", what,
                      ": the residual must be a contiguous float32 tensor, not ", residual.scalar_type());
    TORCH_CHECK_VALUE(residual.numel() == input.numel(), "fairway: ", what, ": the residual has ", residual.numel(),
                      " elements, the input ", input.numel());
    TORCH_CHECK_VALUE(residual.device() == input.device(), "fairway: ", what, ": the residual is on ",
                      residual.device(), ", the input on ", input.device());
    c.residual = residual.data_ptr<float>();
  }
  return c;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> FairwayBackend::allreduceCompressed(at::Tensor& tensor, fwCompressKind_t kind,
                                                                   int blockSize, const at::Tensor& residual,
                                                                   bool average, bool asyncOp) {
  checkTensor(tensor, "all_reduce_compressed");
  const fwCompression_t c = compressionOf(kind, blockSize, residual, tensor, "all_reduce_compressed");
  const fwRedOp_t op = average ? fwAvg : fwSum;
  const at::Tensor& t = tensor;
  Call call = [&](fwStream_t s, fwRequest_t* r) {
    return r ? fwIallReduceCompressed(t.data_ptr(), t.data_ptr(), count(t), fwTypeOf(t), op, &c, comm_, r)
             : fwAllReduceCompressed(t.data_ptr(), t.data_ptr(), count(t), fwTypeOf(t), op, &c, comm_, s);
  };
  return launch(c10d::OpType::ALLREDUCE, t, std::vector<at::Tensor>{t}, call, [residual]() {} /* alive until done */,
                "all_reduce_compressed", asyncOp);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::reduceScatterCompressed(at::Tensor& output, at::Tensor& input,
                                                                       fwCompressKind_t kind, int blockSize,
                                                                       const at::Tensor& residual, bool average,
                                                                       bool asyncOp) {
  const char* what = "reduce_scatter_compressed";
  checkTensor(input, what);
  checkTensor(output, what);
  checkSame(input, output, what);
  TORCH_CHECK_VALUE(input.numel() == output.numel() * getSize(), "fairway: ", what, ": input has ", input.numel(),
                    " elements, not ", getSize(), " x ", output.numel());
  const fwCompression_t c = compressionOf(kind, blockSize, residual, input, what);
  const fwRedOp_t op = average ? fwAvg : fwSum;
  Call call = [&](fwStream_t s, fwRequest_t* r) {
    return r ? fwIreduceScatterCompressed(input.data_ptr(), output.data_ptr(), count(output), fwTypeOf(input), op, &c,
                                          comm_, r)
             : fwReduceScatterCompressed(input.data_ptr(), output.data_ptr(), count(output), fwTypeOf(input), op, &c,
                                         comm_, s);
  };
  return launch(c10d::OpType::_REDUCE_SCATTER_BASE, input, std::vector<at::Tensor>{output}, call,
                [input, residual]() {} /* alive until done */, what, asyncOp);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                              std::vector<std::vector<at::Tensor>>& inputs,
                                                              const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "reduce_scatter");
  TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                    "fairway: reduce_scatter takes one list of ", getSize(), " input tensors");
  for (const at::Tensor& i : inputs[0]) {
    checkSame(i, out, "reduce_scatter");
    TORCH_CHECK_VALUE(i.numel() == out.numel(), "fairway: reduce_scatter: an input has ", i.numel(),
                      " elements, the output ", out.numel());
  }
  at::Tensor output = out;
  if (!out.is_cuda()) {
    // Each rank's block is read where it lies (Fairway's list form): no
    // packed input.
    std::vector<at::Tensor> sources;
    std::vector<const void*> blocks;
    for (const at::Tensor& i : inputs[0]) {
      sources.push_back(readable(i));
      blocks.push_back(sources.back().data_ptr());
    }
    const fwRedOp_t op = fwOpOf(opts.reduceOp, output);
    Call call = [&](fwStream_t s, fwRequest_t* r) {
      return r ? fwIreduceScatterList(blocks.data(), output.data_ptr(), count(output), fwTypeOf(output), op, comm_, r)
               : fwReduceScatterList(blocks.data(), output.data_ptr(), count(output), fwTypeOf(output), op, comm_, s);
    };
    return launch(c10d::OpType::REDUCE_SCATTER, output, outputs, call, [sources]() {} /* alive until done */,
                  "reduce_scatter", opts.asyncOp, inputs[0]);
  }
  at::Tensor flat = flatten(inputs[0], *scratch_);
  return reduceScatterFlat(output, flat, opts, [flat, scratch = scratch_]() { scratch->give(flat); },
                           "reduce_scatter");
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::reduce_scatter_single_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size() && !inputs.empty(), "fairway: reduce_scatter_tensor_coalesced: ",
                    outputs.size(), " outputs for ", inputs.size(), " inputs");
  const int n = getSize();
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(inputs[i], "reduce_scatter_tensor_coalesced");
    checkSame(inputs[i], inputs[0], "reduce_scatter_tensor_coalesced");
    checkSame(outputs[i], inputs[0], "reduce_scatter_tensor_coalesced");
    TORCH_CHECK_VALUE(inputs[i].numel() == outputs[i].numel() * n, "fairway: reduce_scatter_tensor_coalesced: input ",
                      i, " has ", inputs[i].numel(), " elements, not ", n, " x ", outputs[i].numel());
    sizes.push_back(outputs[i].numel());
  }
  // Rank r's block: its piece of every input, in order; one reduce-scatter.
  const int64_t block = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  std::vector<at::Tensor> pieces;
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < inputs.size(); ++i) pieces.push_back(inputs[i].view({-1}).narrow(0, r * sizes[i], sizes[i]));
  }
  at::Tensor packed = flatten(pieces, *scratch_);
  at::Tensor reduced = scratch_->take(block, packed.options());
  const fwRedOp_t op = fwOpOf(opts.reduceOp, packed);
  Call call = [&](fwStream_t s, fwRequest_t* r) {
    return r ? fwIreduceScatter(packed.data_ptr(), reduced.data_ptr(), count(reduced), fwTypeOf(packed), op, comm_, r)
             : fwReduceScatter(packed.data_ptr(), reduced.data_ptr(), count(reduced), fwTypeOf(packed), op, comm_, s);
  };
  auto out = outputs;
  Finish finish = copyOutAndRelease(reduced, out, {packed});
  return launch(c10d::OpType::COALESCED, packed, outputs, call, finish, "reduce_scatter_tensor_coalesced",
                opts.asyncOp, inputs);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                                 std::vector<int64_t>& outputSplits,
                                                                 std::vector<int64_t>& inputSplits,
                                                                 const c10d::AllToAllOptions& opts) {
  checkTensor(input, "all_to_all_single");
  checkTensor(output, "all_to_all_single");
  checkSame(input, output, "all_to_all_single");
  return allToAllv(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", output, input, outputSplits, inputSplits,
                   std::vector<at::Tensor>{output}, nullptr, opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::allToAllv(c10d::OpType type, const char* what, at::Tensor& output,
                                                         at::Tensor& input, const std::vector<int64_t>& outputSplits,
                                                         const std::vector<int64_t>& inputSplits,
                                                         std::vector<at::Tensor> outputs, Finish after,
                                                         bool asyncOp) {
  const int n = getSize();
  // Splits count rows of dim 0; empty splits mean equal blocks.
  auto counts = [n](const at::Tensor& t, const std::vector<int64_t>& splits, const char* side) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const int64_t rowElems = rows == 0 ? 0 : t.numel() / rows;
    std::vector<size_t> c(n), d(n);
    if (splits.empty()) {
      TORCH_CHECK_VALUE(rows % n == 0, "fairway: all_to_all_single: ", side, " has ", rows,
                        " rows, not a multiple of the group size ", n, " (give split sizes)");
      for (int r = 0; r < n; ++r) c[r] = static_cast<size_t>(rows / n * rowElems);
    } else {
      TORCH_CHECK_VALUE(static_cast<int>(splits.size()) == n, "fairway: all_to_all_single: ", splits.size(), " ",
                        side, " split sizes for a group of ", n);
      int64_t total = 0;
      for (int r = 0; r < n; ++r) {
        TORCH_CHECK_VALUE(splits[r] >= 0, "fairway: all_to_all_single: negative ", side, " split size");
        c[r] = static_cast<size_t>(splits[r] * rowElems);
        total += splits[r];
      }
      TORCH_CHECK_VALUE(total == rows, "fairway: all_to_all_single: ", side, " split sizes add up to ", total,
                        ", the tensor has ", rows, " rows");
    }
    for (int r = 1; r < n; ++r) d[r] = d[r - 1] + c[r - 1];
    return std::make_pair(c, d);
  };
  auto send = std::make_shared<std::pair<std::vector<size_t>, std::vector<size_t>>>(counts(input, inputSplits, "input"));
  auto recv =
      std::make_shared<std::pair<std::vector<size_t>, std::vector<size_t>>>(counts(output, outputSplits, "output"));
  Call call = [&](fwStream_t s, fwRequest_t* r) {
    return r ? fwIallToAllv(input.data_ptr(), send->first.data(), send->second.data(), output.data_ptr(),
                            recv->first.data(), recv->second.data(), fwTypeOf(input), comm_, r)
             : fwAllToAllv(input.data_ptr(), send->first.data(), send->second.data(), output.data_ptr(),
                           recv->first.data(), recv->second.data(), fwTypeOf(input), comm_, s);
  };
  // The input and the counts live until the call is done.
  Finish finish = [input, send, recv, after]() {
    if (after) after();
  };
  return launch(type, input, std::move(outputs), call, finish, what, asyncOp);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::AllToAllOptions& opts) {
  const int n = getSize();
  TORCH_CHECK_VALUE(static_cast<int>(outputs.size()) == n && static_cast<int>(inputs.size()) == n,
                    "fairway: all_to_all takes ", n, " input and ", n, " output tensors");
  std::vector<int64_t> inSplits, outSplits;
  for (int r = 0; r < n; ++r) {
    checkTensor(inputs[r], "all_to_all");
    checkTensor(outputs[r], "all_to_all");
    checkSame(inputs[r], inputs[0], "all_to_all");
    checkSame(outputs[r], inputs[0], "all_to_all");
    inSplits.push_back(inputs[r].numel());
    outSplits.push_back(outputs[r].numel());
  }
  if (!inputs[0].is_cuda()) {
    Exchange exchange;
    for (int r = 0; r < n; ++r) {
      if (r == getRank()) {
        exchange.local.emplace_back(inputs[r], outputs[r]);
      } else {
        exchange.sends.emplace_back(r, inputs[r]);
        exchange.receives.emplace_back(r, outputs[r]);
      }
    }
    return runExchange(c10d::OpType::ALLTOALL, "all_to_all", exchange, inputs, outputs, opts.asyncOp);
  }
  at::Tensor packedIn = flatten(inputs, *scratch_);
  at::Tensor packedOut =
      scratch_->take(std::accumulate(outSplits.begin(), outSplits.end(), int64_t{0}), packedIn.options());
  auto out = outputs;
  Finish copyOut = copyOutAndRelease(packedOut, out, {packedIn});
  return allToAllv(c10d::OpType::ALLTOALL, "all_to_all", packedOut, packedIn, outSplits, inSplits, outputs, copyOut,
                   opts.asyncOp);
}

// Messages of one tag between a pair match in call order, as gloo's do. On
// CUDA tensors the tag is not used: device messages match in call order, as
// ProcessGroupNCCL's do.
c10::intrusive_ptr<c10d::Work> FairwayBackend::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  const at::Tensor& t = single(tensors, "send");
  TORCH_CHECK_VALUE(dstRank >= 0 && dstRank < getSize(), "fairway: send to rank ", dstRank,
                    ", not a rank of this group of ", getSize());
  checkTag(tag, "send");
  Call call = [&](fwStream_t s, fwRequest_t* r) {
    return r ? fwIsendTagged(t.data_ptr(), count(t), fwTypeOf(t), dstRank, tag, comm_, r)
             : fwSendTagged(t.data_ptr(), count(t), fwTypeOf(t), dstRank, s ? 0 : tag, comm_, s);
  };
  return launch(c10d::OpType::SEND, t, tensors, call, nullptr, "send", true);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  const at::Tensor& t = single(tensors, "recv");
  TORCH_CHECK_VALUE(srcRank >= 0 && srcRank < getSize(), "fairway: recv from rank ", srcRank,
                    ", not a rank of this group of ", getSize());
  checkTag(tag, "recv");
  Call call = [&](fwStream_t s, fwRequest_t* r) {
    return r ? fwIrecvTagged(t.data_ptr(), count(t), fwTypeOf(t), srcRank, tag, nullptr, comm_, r)
             : fwRecvTagged(t.data_ptr(), count(t), fwTypeOf(t), srcRank, s ? 0 : tag, nullptr, comm_, s);
  };
  return launch(c10d::OpType::RECV, t, tensors, call, nullptr, "recv", true);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  const at::Tensor& t = single(tensors, "recv");
  TORCH_CHECK_VALUE(!t.is_cuda(), "fairway: a receive from any source takes a CPU tensor (device messages are "
                                  "matched in call order from a named rank)");
  checkTag(tag, "recv");
  // Written by Fairway when the receive completes, before the Work does.
  auto source = std::make_shared<int>(-1);
  Call call = [&](fwStream_t, fwRequest_t* r) {
    return fwIrecvTagged(t.data_ptr(), count(t), fwTypeOf(t), FAIRWAY_ANY_SOURCE, tag, source.get(), comm_, r);
  };
  auto work = launch(c10d::OpType::RECVANYSOURCE, t, tensors, call, nullptr, "recv", true);
  static_cast<FairwayWork*>(work.get())->reportSource(std::move(source));
  return work;
}

void FairwayBackend::checkTag(int tag, const char* what) const {
  TORCH_CHECK_VALUE(tag >= 0 && tag < kExchangeTag, "fairway: ", what, " with tag ", tag, ": tags run from 0 to ",
                    kExchangeTag - 1);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::barrier(const c10d::BarrierOptions& opts) {
  ++collectives_;
  return runHost(c10d::OpType::BARRIER, {}, {},
                 [&](fwRequest_t* r) { return r ? fwIbarrier(comm_, r) : fwBarrier(comm_, nullptr); }, nullptr,
                 "barrier", opts.asyncOp);
}

c10::intrusive_ptr<FairwayWork> FairwayBackend::makeWork(c10d::OpType type, const std::vector<at::Tensor>& inputs,
                                                         std::vector<at::Tensor> outputs,
                                                         std::optional<c10::Device> device) const {
  auto listType = c10::ListType::create(c10::TensorType::get());
  auto future = device ? c10::make_intrusive<c10::ivalue::Future>(listType, std::vector<c10::Device>{*device})
                       : c10::make_intrusive<c10::ivalue::Future>(listType);
  return c10::make_intrusive<FairwayWork>(title(type), type, inputs, std::move(outputs), future, timeout_);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::completedWork(c10d::OpType type, const std::vector<at::Tensor>& inputs,
                                                               std::vector<at::Tensor> outputs) {
  auto work = makeWork(type, inputs, std::move(outputs));
  work->finish(nullptr);
  return work;
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::allreduceSparse(at::Tensor& tensor, const c10d::AllreduceOptions& opts) {
  TORCH_CHECK_VALUE(opts.reduceOp == c10d::ReduceOp::SUM, "fairway: all_reduce of a sparse tensor sums (ReduceOp.SUM)"
                    ", it cannot apply reduce op ", static_cast<int>(opts.reduceOp.op_));
  const at::Tensor local = tensor.coalesce();
  const at::Tensor indices = local.indices().contiguous();  // sparse_dim x nnz, int64
  const at::Tensor values = local.values().contiguous();    // nnz x dense dims
  fwTypeOf(values);
  const int n = getSize();
  const int64_t nnz = local._nnz();
  auto gather = [this](const at::Tensor& in, const char* what) {
    at::Tensor out = at::empty({getSize() * in.numel()}, in.options());
    at::Tensor input = in;
    Call call = [&](fwStream_t s, fwRequest_t*) {
      return fwAllGather(input.data_ptr(), out.data_ptr(), count(input), fwTypeOf(input), comm_, s);
    };
    launch(c10d::OpType::_ALLGATHER_BASE, input, {out}, call, nullptr, what, false)->wait();
    return out;
  };
  const at::Tensor counts = gather(at::full({1}, nnz, indices.options()), "all_reduce (sparse): counts").cpu();
  const int64_t most = counts.max().item<int64_t>();
  // Each rank's indices and values, padded to the largest count.
  at::Tensor paddedIndices = at::zeros({indices.size(0), most}, indices.options());
  paddedIndices.narrow(1, 0, nnz).copy_(indices);
  std::vector<int64_t> valueShape = values.sizes().vec();
  valueShape[0] = most;
  at::Tensor paddedValues = at::zeros(valueShape, values.options());
  paddedValues.narrow(0, 0, nnz).copy_(values);
  const at::Tensor allIndices = gather(paddedIndices, "all_reduce (sparse): indices").view({n, indices.size(0), most});
  std::vector<int64_t> gatheredShape{n};
  gatheredShape.insert(gatheredShape.end(), valueShape.begin(), valueShape.end());
  const at::Tensor allValues = gather(paddedValues, "all_reduce (sparse): values").view(gatheredShape);
  std::vector<at::Tensor> indexParts, valueParts;
  for (int r = 0; r < n; ++r) {
    const int64_t c = counts[r].item<int64_t>();
    indexParts.push_back(allIndices[r].narrow(1, 0, c));
    valueParts.push_back(allValues[r].narrow(0, 0, c));
  }
  const at::Tensor sum =
      at::sparse_coo_tensor(at::cat(indexParts, 1), at::cat(valueParts, 0), tensor.sizes(), tensor.options())
          .coalesce();
  tensor.copy_(sum);  // in place, as for dense tensors
  return completedWork(c10d::OpType::ALLREDUCE, {tensor}, {tensor});
}

void FairwayBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  TORCH_CHECK_WITH(DistBackendError, store_, "fairway: monitored_barrier needs the group's store, and this group "
                   "was made without one");
  using Clock = std::chrono::steady_clock;
  const auto timeout = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  const std::string round = "fairway/monitored_barrier/" + std::to_string(monitoredBarriers_++) + "/";
  const auto arrivedKey = [&](int r) { return round + "arrived/" + std::to_string(r); };
  const std::string releasedKey = round + "released";
  const int me = getRank();
  if (me != 0) {
    store_->set(arrivedKey(me), std::vector<uint8_t>{1});
    std::string verdict;
    try {
      // A Store's zero timeout means no limit: wait at least a millisecond.
      store_->wait({releasedKey}, std::max(timeout, std::chrono::milliseconds(1)));
      const std::vector<uint8_t> value = store_->get(releasedKey);
      verdict.assign(value.begin(), value.end());
    } catch (const std::exception& e) {  // the store's timeout, or the store gone: said, not swallowed
      verdict = std::string("no word from rank 0 within ") + std::to_string(timeout.count()) + " ms: " + e.what();
    }
    if (verdict == "passed") return;
    TORCH_CHECK_WITH(DistBackendError, false, "Rank ", me, " successfully reached monitoredBarrier, but received "
                     "errors while waiting for send/recv from rank 0 (fairway: ", verdict, ")");
  }
  const auto deadline = Clock::now() + timeout;
  std::vector<int> missing;
  for (int r = 1; r < getSize(); ++r) missing.push_back(r);
  for (;;) {
    missing.erase(std::remove_if(missing.begin(), missing.end(), [&](int r) { return store_->check({arrivedKey(r)}); }),
                  missing.end());
    if (missing.empty() || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(std::chrono::milliseconds(5), deadline - Clock::now()));
  }
  for (int r = 1; r < getSize(); ++r) store_->deleteKey(arrivedKey(r));
  if (missing.empty()) {
    store_->set(releasedKey, std::vector<uint8_t>{'p', 'a', 's', 's', 'e', 'd'});
    return;
  }
  std::string ranks;
  for (size_t i = 0; i < missing.size(); ++i) ranks += (i == 0 ? "" : ", ") + std::to_string(missing[i]);
  std::string why;
  if (timeout.count() <= 0) {
    why = "Rank 0 timed out in monitoredBarrier after " + std::to_string(timeout.count()) + " ms (ranks " + ranks +
          " had not arrived)";
  } else if (waitAllRanks) {
    why = (missing.size() == 1 ? "Rank " : "Ranks ") + ranks + " failed to pass monitoredBarrier in " +
          std::to_string(timeout.count()) + " ms";
  } else {
    why = "Rank " + std::to_string(missing[0]) + " failed to pass monitoredBarrier in " +
          std::to_string(timeout.count()) + " ms" +
          (missing.size() > 1 ? " (the first of ranks " + ranks + " that did not arrive)" : "");
  }
  const std::string verdict = "rank 0 reports: " + why;
  store_->set(releasedKey, std::vector<uint8_t>(verdict.begin(), verdict.end()));
  TORCH_CHECK_WITH(DistBackendError, false, "[Rank 0]: ", why);
}

void FairwayBackend::startCoalescing() {
  std::lock_guard<std::mutex> lock(callMutex_);
  TORCH_CHECK_VALUE(!coalescing_, "fairway: startCoalescing inside a coalescing region (call endCoalescing first)");
  coalescing_ = true;
  coalesced_.clear();
  coalescedDevice_.reset();
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::endCoalescing() {
  std::vector<c10::intrusive_ptr<FairwayWork>> works;
  std::optional<at::Device> device;
  {
    std::lock_guard<std::mutex> lock(callMutex_);
    TORCH_CHECK_VALUE(coalescing_, "fairway: endCoalescing without startCoalescing");
    coalescing_ = false;
    works.swap(coalesced_);
    device = coalescedDevice_;
    coalescedDevice_.reset();
  }
  std::vector<at::Tensor> outputs;
  for (const auto& w : works) {
    for (const at::Tensor& t : w->result()) outputs.push_back(t);
  }
  if (device) {
    // CUDA calls ran in order on the current stream: a Work whose future
    // records an event there covers them all.
    auto work = makeWork(c10d::OpType::COALESCED, {}, outputs, *device);
    work->finish(nullptr);
    return work;
  }
  TORCH_CHECK_WITH(DistBackendError, comm_ != nullptr, "fairway: endCoalescing on a process group already shut down");
  auto work = makeWork(c10d::OpType::COALESCED, {}, outputs);
  // Completes once the region's calls have, with the first error among them.
  Finish firstError = [works]() {
    for (const auto& w : works) {
      if (w->exception()) std::rethrow_exception(w->exception());
    }
  };
  completions_.addAfter(works, work, std::move(firstError), "coalesced operations");
  return work;
}

// ---- Splits ----

c10::intrusive_ptr<FairwayBackend> FairwayBackend::splitForGroup(int color, int key, int size,
                                                                std::chrono::milliseconds timeout,
                                                                c10::intrusive_ptr<c10d::Store> store) {
  fwComm_t child = nullptr;
  {
    std::lock_guard<std::mutex> lock(callMutex_);
    const fwResult_t split = fwCommSplit(comm_, color, key, &child);
    if (split != fwSuccess) throwFairwayError(split, "splitting the group");
  }
  if (child == nullptr) return {};
  int rank = 0, count = 0;
  fwCommUserRank(child, &rank);
  fwCommCount(child, &count);
  TORCH_CHECK(count == size, "fairway: split made a group of ", count, " ranks, expected ", size);
  return c10::make_intrusive<FairwayBackend>(child, rank, count, timeout, std::move(store), name_);
}

void FairwayBackend::performNocolorSplit() { splitForGroup(FAIRWAY_SPLIT_NOCOLOR, 0, 0, timeout_, {}); }

c10::intrusive_ptr<c10d::Backend> FairwayBackend::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                        const std::vector<int>& ranks,
                                                        const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  const auto mine = std::find(ranks.begin(), ranks.end(), getRank());
  const std::chrono::milliseconds timeout = opts ? opts->timeout : timeout_;
  if (mine == ranks.end()) {
    splitForGroup(FAIRWAY_SPLIT_NOCOLOR, 0, 0, timeout, {});
    return nullptr;
  }
  // Groups are disjoint, so a group's lowest rank names it; the key keeps
  // the order the caller gave.
  const int color = *std::min_element(ranks.begin(), ranks.end());
  return splitForGroup(color, static_cast<int>(mine - ranks.begin()), static_cast<int>(ranks.size()), timeout,
                       store);
}

}  // namespace fairway_torch
