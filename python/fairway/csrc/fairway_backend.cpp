// The backend itself: creation through the group's store, splits, the
// three ways a call runs (host, exchange, device) and the Works they return.
#include "fairway_backend.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
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

}  // namespace

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

void FairwayBackend::requireComm(const char* what) const {
  TORCH_CHECK_WITH(DistBackendError, comm_ != nullptr, "fairway: ", what,
                   awaitingReconfigure_ ? " before reconfigure formed the group (made with enable_reconfigure)"
                                        : " on a process group already shut down");
}

void FairwayBackend::checkRoot(int64_t root, const char* what) const {
  TORCH_CHECK_VALUE(root >= 0 && root < getSize(), "fairway: ", what, " root ", root,
                    " is not a rank of this group of ", getSize());
}

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

FairwayBackend::FairwayBackend(Deferred, c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                               std::chrono::milliseconds timeout, std::string name)
    : c10d::Backend(rank, size), timeout_(timeout), store_(std::move(store)), name_(std::move(name)) {
  makeTitles();
  awaitingReconfigure_ = true;
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

void FairwayBackend::failCall(fwResult_t result, const char* what) {
  // The communicator broke (a peer failed, a timeout, a mismatch, a
  // revocation): torch's abort hooks run first (its flight recorder dumps).
  // A bad argument breaks nothing.
  switch (result) {
    case fwCollectiveMismatch:
    case fwRemoteError:
    case fwTimeout:
    case fwTransportError:
    case fwSystemError:
    case fwInternalError:
    case fwRevoked: hooks_->failed(); break;
    default: break;
  }
  throwFairwayError(result, what);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::runHost(c10d::OpType type, const std::vector<at::Tensor>& inputs,
                                                       std::vector<at::Tensor> outputs, const fwOpArgs_t& call,
                                                       Finish finish, const char* what, bool asyncOp) {
  requireComm(what);
  auto work = makeWork(type, inputs, outputs);
  if (!asyncOp) {
    fwResult_t result;
    {
      std::lock_guard<std::mutex> lock(callMutex_);
      result = fwPost(&call, comm_, nullptr, nullptr);  // blocking; Fairway orders it after the calls in flight
      if (result == fwSuccess && coalescing_) coalesced_.push_back(work);
    }
    if (result != fwSuccess) failCall(result, what);
    if (finish) finish();
    work->finish(nullptr);
    return work;
  }
  fwRequest_t request = nullptr;
  {
    std::lock_guard<std::mutex> lock(callMutex_);
    const fwResult_t posted = fwPost(&call, comm_, nullptr, &request);
    if (posted != fwSuccess) failCall(posted, what);
    if (coalescing_) coalesced_.push_back(work);
    completions_.add({request}, work, std::move(finish), what);
  }
  return work;
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::runExchange(c10d::OpType type, const char* what,
                                                           const Exchange& exchange,
                                                           const std::vector<at::Tensor>& inputs,
                                                           std::vector<at::Tensor> outputs, bool asyncOp) {
  requireComm(what);
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
      completions_.add(std::move(requests), work, std::move(finish), what);
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
  if (result != fwSuccess) failCall(result, what);
  finish();
  work->finish(nullptr);
  return work;
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::runDevice(c10d::OpType type, const at::Device& device,
                                                         const std::vector<at::Tensor>& inputs,
                                                         std::vector<at::Tensor> outputs, const fwOpArgs_t& call,
                                                         const char* what) {
#ifdef FAIRWAY_TORCH_CUDA
  requireComm(what);
  c10::cuda::CUDAGuard guard(device);
  // On the current stream: ordered after what the caller enqueued before,
  // and what it enqueues after sees the result (the tensors were made for
  // this stream, so the caching allocator needs no extra record).
  cudaStream_t stream = at::cuda::getCurrentCUDAStream(device.index()).stream();
  {
    std::lock_guard<std::mutex> lock(callMutex_);
    const fwResult_t enqueued = fwPost(&call, comm_, stream, nullptr);
    if (enqueued != fwSuccess) failCall(enqueued, what);
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
  (void)type; (void)inputs; (void)outputs; (void)call;
  TORCH_CHECK(false, "fairway: ", what, " on ", device,
              ": this build of the fairway extension has no CUDA support (torch without CUDA at build time)");
#endif
}

// Each operation validates, describes its Fairway call once, and calls
// `launch`. CUDA tensors: enqueued on the current stream, and `finish`
// (copies out of temporaries) enqueued right after it there. Host
// tensors: runHost.
c10::intrusive_ptr<c10d::Work> FairwayBackend::launch(c10d::OpType type, const at::Tensor& anyTensor,
                                                      std::vector<at::Tensor> outputs, const fwOpArgs_t& call,
                                                      Finish finish, const char* what, bool asyncOp,
                                                      const std::vector<at::Tensor>& inputs) {
  // A collective carries its number in this group, which is torch's sequence
  // number for it: Fairway's flight record keeps both (fwOpArgs_t::callerSequence).
  fwOpArgs_t numbered = call;
  if (!c10d::isP2POp(type)) numbered.callerSequence = ++collectives_;
  const std::vector<at::Tensor> recorded = inputs.empty() ? std::vector<at::Tensor>{anyTensor} : inputs;
  if (anyTensor.is_cuda()) {
    auto work = runDevice(type, anyTensor.device(), recorded, std::move(outputs), numbered, what);
    if (finish) finish();
    return work;
  }
  return runHost(type, recorded, std::move(outputs), numbered, std::move(finish), what, asyncOp);
}

c10::intrusive_ptr<FairwayWork> FairwayBackend::makeWork(c10d::OpType type, const std::vector<at::Tensor>& inputs,
                                                         std::vector<at::Tensor> outputs,
                                                         std::optional<c10::Device> device) const {
  // The profiler's event (and its copy of the inputs) only while a profiler listens.
  const bool profiled = at::getStepCallbacksUnlessEmpty(at::RecordScope::USER_SCOPE).has_value();
  auto work = c10::make_intrusive<FairwayWork>(profiled ? title(type) : nullptr, type,
                                               profiled ? std::optional<std::vector<at::Tensor>>(inputs) : std::nullopt,
                                               std::move(outputs), device, timeout_);
  // Keys never reused in the process, as torch's completion hooks want.
  static std::atomic<uint64_t> nextCompletionKey{1};
  work->tellWhenFinished(hooks_, hooks_->wantsCompletion() ? nextCompletionKey.fetch_add(1) : 0);
  return work;
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::completedWork(c10d::OpType type, const std::vector<at::Tensor>& inputs,
                                                               std::vector<at::Tensor> outputs) {
  auto work = makeWork(type, inputs, std::move(outputs));
  work->finish(nullptr);
  return work;
}

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

c10::intrusive_ptr<c10d::Backend> FairwayBackend::shrink(
    const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
    const c10::intrusive_ptr<c10d::Backend::Options>& optsOverride) {
  TORCH_CHECK((shrinkFlags & ~1) == 0, "fairway: shrink flags ", shrinkFlags, ": only SHRINK_DEFAULT (0) and SHRINK_ABORT (1)");
  const std::vector<int> exclude(ranksToExclude.begin(), ranksToExclude.end());
  fwComm_t shrunk = nullptr;
  {
    std::lock_guard<std::mutex> lock(callMutex_);
    const fwResult_t result =
        fwCommShrink(comm_, exclude.data(), static_cast<int>(exclude.size()),
                     (shrinkFlags & 1) ? FAIRWAY_SHRINK_ABORT : FAIRWAY_SHRINK_DEFAULT, &shrunk);
    if (result != fwSuccess) throwFairwayError(result, "shrinking the group");
  }
  int rank = 0, count = 0;
  fwCommUserRank(shrunk, &rank);
  fwCommCount(shrunk, &count);
  return c10::make_intrusive<FairwayBackend>(shrunk, rank, count, optsOverride ? optsOverride->timeout : timeout_,
                                             store_, name_);
}

c10d::ErrorType FairwayBackend::getError() {
  fwResult_t state = fwSuccess;
  if (fwCommGetAsyncError(comm_, &state) != fwSuccess) return c10d::ErrorType::COMM_ERROR;
  switch (state) {
    case fwSuccess: return c10d::ErrorType::SUCCESS;
    case fwTimeout: return c10d::ErrorType::TIMEOUT;
    case fwRemoteError:
    case fwRevoked: return c10d::ErrorType::REMOTE_ERROR;
    default: return c10d::ErrorType::COMM_ERROR;
  }
}

}  // namespace fairway_torch
