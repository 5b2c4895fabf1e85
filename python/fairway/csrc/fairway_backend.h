// Fairway as a torch.distributed backend: a c10d::Backend over one Fairway
// communicator. Each operation is described once (fwOpArgs_t) and posted
// with fwPost: host tensors non-blocking, their Works completed when Fairway
// tells (completions.h), or blocking on the calling thread; CUDA tensors
// stream-ordered on the current stream, as ProcessGroupNCCL orders them.
#pragma once

#include <fairway/fairway.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <memory>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "completions.h"
#include "scratch_pool.h"
#include "torch_hooks.h"
#include "tensors.h"
#include "work.h"

// The tensor-form collectives' names in the torch built against (setup.py
// reads them from its Backend.hpp): all_gather_single and the rest where
// torch has them, else only the older _allgather_base and the rest, which
// then forward to the same implementations.
#if FAIRWAY_TORCH_SINGLE_NAMES
#define FAIRWAY_SINGLE_NAMES_OVERRIDE override
#else
#define FAIRWAY_SINGLE_NAMES_OVERRIDE
#endif

namespace fairway_torch {

class FairwayBackend : public c10d::Backend {
 public:
  // Every rank of the group calls it: group rank 0 makes the unique id and
  // publishes it in the store, the others read it from there. `name`: the
  // name torch knows the backend by ("fairway" unless registered under
  // another), which its profiler events carry.
  FairwayBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                 std::chrono::milliseconds timeout, std::string name = "fairway");
  // For a group made with enable_reconfigure: no communicator until
  // reconfigure forms one; calls before then fail, saying so.
  struct Deferred {};
  FairwayBackend(Deferred, c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                 std::chrono::milliseconds timeout, std::string name);
  // Adopts a communicator made by fwCommSplit.
  FairwayBackend(fwComm_t comm, int rank, int size, std::chrono::milliseconds timeout,
                 c10::intrusive_ptr<c10d::Store> store, std::string name);
  ~FairwayBackend() override;

  const std::string getBackendName() const override { return "fairway"; }
  bool supportsSplitting() const override { return true; }
  // dist.shrink_group: the survivors (every rank not in ranksToExclude)
  // agree with fwCommShrink and get a backend over the rest, ranks
  // renumbered in order; SHRINK_ABORT revokes this group's communicator first.
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
                                           const c10::intrusive_ptr<c10d::Backend::Options>& optsOverride) override;
#ifdef C10D_BACKEND_HAS_RECONFIGURE
  // dist._reconfigure: a group re-formed with a new membership (survivors
  // plus replacements, say). Each process's handle is a unique id whose
  // bootstrap root it serves; reconfigure forms the communicator through
  // the first handle's, ranks by position (a set: sorted), and releases
  // the ids it offered that were not used. The old communicator, if any,
  // is revoked and freed once the new one is formed.
  bool supportsReconfigure() const override { return true; }
  c10d::ReconfigureHandle get_reconfigure_handle() const override;
  c10::intrusive_ptr<c10d::Work> reconfigure(const c10d::ReconfigureOptions& opts) override;
#endif
  // The communicator's state as torch's ErrorType: a peer's failure or a
  // revocation is REMOTE_ERROR, a timeout TIMEOUT.
  c10d::ErrorType getError() override;
  // Between startCoalescing and endCoalescing, calls are posted as usual;
  // endCoalescing's Work completes when all of them have, and fails if any
  // did.
  // torch's coalescing manager turns all_reduce, all_gather_into_tensor and
  // reduce_scatter_tensor groups into one *_coalesced call: one Fairway call.
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  // Collectives issued on this group so far (point-to-point calls not
  // counted), the same on every rank while the ranks call alike: torch
  // compares it across ranks to catch collectives called out of step.
  uint64_t getSequenceNumberForGroup() override { return collectives_.load(); }
#ifdef FAIRWAY_TORCH_HOOKS
  // torch's completion and abort hooks (torch_hooks.h): what its flight
  // recorder needs to see a fairway call complete, and to dump on a failure.
  bool supportsCompletionHooks() const override { return true; }
  void registerCompletionHook(int64_t id, c10d::CompletionHook hook) override {
    hooks_->addCompletion(id, std::move(hook));
  }
  void unregisterCompletionHook(int64_t id) override { hooks_->removeCompletion(id); }
  bool supportsAbortHooks() const override { return true; }
  void registerAbortHook(int64_t id, c10d::AbortHook hook) override { hooks_->addAbort(id, std::move(hook)); }
  void unregisterAbortHook(int64_t id) override { hooks_->removeAbort(id); }
#endif
  // What split_group copies for the child: the backend's name and timeout.
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override {
    return c10::make_intrusive<c10d::Backend::Options>("fairway", timeout_);
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_gather_single(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions& opts) FAIRWAY_SINGLE_NAMES_OVERRIDE;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_gather_single_coalesced(std::vector<at::Tensor>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllgatherOptions& opts) FAIRWAY_SINGLE_NAMES_OVERRIDE;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single(at::Tensor& output, at::Tensor& input,
                                                       const c10d::ReduceScatterOptions& opts) FAIRWAY_SINGLE_NAMES_OVERRIDE;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) FAIRWAY_SINGLE_NAMES_OVERRIDE;
  c10::intrusive_ptr<c10d::Work> all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                   std::vector<int64_t>& outputSplits,
                                                   std::vector<int64_t>& inputSplits,
                                                   const c10d::AllToAllOptions& opts) FAIRWAY_SINGLE_NAMES_OVERRIDE;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
#if !FAIRWAY_TORCH_SINGLE_NAMES
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    return all_gather_single(output, input, opts);
  }
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override {
    return all_gather_single_coalesced(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override {
    return reduce_scatter_single(output, input, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override {
    return reduce_scatter_single_coalesced(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits, std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override {
    return all_to_all_single(output, input, outputSplits, inputSplits, opts);
  }
#endif
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  // The first message of `tag` to arrive from any rank (CPU tensors); the
  // Work's sourceRank() names the sender.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  // gloo's monitored barrier, through the group's store rather than the
  // communicator (a rank that never comes must not leave a receive posted):
  // every rank checks in, rank 0 waits up to the timeout and names the
  // first rank that did not come (every one with waitAllRanks), and the
  // others learn from rank 0 whether the barrier passed.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;

  // Compressed allreduce (in place) and reduce-scatter (fwAllReduceCompressed,
  // fwReduceScatterCompressed) of float32, float16 or bfloat16 tensors, sum
  // or average; residual: an error-feedback buffer (float32, one element
  // per input element) or undefined. Not part of c10d's interface: reached
  // through fairway.torch.compression.
  c10::intrusive_ptr<c10d::Work> allreduceCompressed(at::Tensor& tensor, fwCompressKind_t kind, int blockSize,
                                                     const at::Tensor& residual, bool average, bool asyncOp);
  c10::intrusive_ptr<c10d::Work> reduceScatterCompressed(at::Tensor& output, at::Tensor& input, fwCompressKind_t kind,
                                                         int blockSize, const at::Tensor& residual, bool average,
                                                         bool asyncOp);

  // split_group: every rank of this group calls it; `ranks` are group ranks.
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<c10d::Backend::Options>& opts) override;
  // new_group on a default group bound to a device: members split with the
  // group's lowest global rank as color, non-members with no color.
  c10::intrusive_ptr<FairwayBackend> splitForGroup(int color, int key, int size, std::chrono::milliseconds timeout,
                                                   c10::intrusive_ptr<c10d::Store> store);
  void performNocolorSplit();

  void abort() override;
  void shutdown() override;
  fwComm_t comm() const { return comm_; }

  // What runs once a host call's data is in place, before its Work completes.
  using Finish = Completions::Finish;

 private:
  // A host call: posted with a request, its Work completing when Fairway
  // tells (fwRequestOnComplete), after `finish` (copies out of
  // temporaries) ran. A blocking call (torch's async_op=False) is posted
  // in the blocking form on the calling thread instead: no hand-off to
  // Fairway's worker and back, which costs two context switches a call.
  c10::intrusive_ptr<c10d::Work> runHost(c10d::OpType type, const std::vector<at::Tensor>& inputs,
                                         std::vector<at::Tensor> outputs, const fwOpArgs_t& call, Finish finish,
                                         const char* what, bool asyncOp);
  // The CPU list forms of all_to_all, gather and scatter move each tensor
  // straight from its sender to its receiver as one message, with nothing
  // packed or copied out (Fairway's all-to-all, gather and scatter are
  // messages between the ranks too): `receives` and `sends` by peer, and
  // `local` (from, to) copies of this rank's own part. The messages carry
  // kExchangeTag, which torch's send/recv may not use, so user messages
  // never meet them; every rank posts a group's calls in the same order.
  struct Exchange {
    std::vector<std::pair<int, at::Tensor>> receives;
    std::vector<std::pair<int, at::Tensor>> sends;
    std::vector<std::pair<at::Tensor, at::Tensor>> local;
  };
  static constexpr int kExchangeTag = FAIRWAY_MAX_TAG;
  c10::intrusive_ptr<c10d::Work> runExchange(c10d::OpType type, const char* what, const Exchange& exchange,
                                             const std::vector<at::Tensor>& inputs, std::vector<at::Tensor> outputs,
                                             bool asyncOp);
  // A device call: enqueued on the device's current stream; returns a Work
  // whose future completes on that stream.
  c10::intrusive_ptr<c10d::Work> runDevice(c10d::OpType type, const at::Device& device,
                                           const std::vector<at::Tensor>& inputs, std::vector<at::Tensor> outputs,
                                           const fwOpArgs_t& call, const char* what);
  // Every operation's one path: `call` describes it once (fwPost's
  // description) and runs on the device (CUDA tensors) or the host.
  // `inputs`: what the profiler records as the call's inputs when they are
  // not just `anyTensor` (the caller's tensors of a coalesced call).
  c10::intrusive_ptr<c10d::Work> launch(c10d::OpType type, const at::Tensor& anyTensor,
                                        std::vector<at::Tensor> outputs, const fwOpArgs_t& call, Finish finish,
                                        const char* what, bool asyncOp,
                                        const std::vector<at::Tensor>& inputs = {});
  // all_to_all_single's call on flat buffers, with `after` run once the data
  // is in place (the list form's copy-out) and the Work completing on
  // `outputs`: every form of all-to-all returns before its data has moved.
  c10::intrusive_ptr<c10d::Work> allToAllv(c10d::OpType type, const char* what, at::Tensor& output,
                                           at::Tensor& input, const std::vector<int64_t>& outputSplits,
                                           const std::vector<int64_t>& inputSplits, std::vector<at::Tensor> outputs,
                                           Finish after, bool asyncOp);
  // Sum of sparse COO tensors, as gloo computes it: every rank's indices
  // and values gathered (padded to the largest count), then coalesced.
  // Runs on the calling thread: each step's sizes come from the one before.
  c10::intrusive_ptr<c10d::Work> allreduceSparse(at::Tensor& tensor, const c10d::AllreduceOptions& opts);
  // A Work of this group for an operation, not yet finished; with a device,
  // its future records an event on that device's current stream.
  // Throws the error of a failed call, after running torch's abort hooks
  // where it broke the communicator.
  [[noreturn]] void failCall(fwResult_t result, const char* what);
  c10::intrusive_ptr<FairwayWork> makeWork(c10d::OpType type, const std::vector<at::Tensor>& inputs,
                                           std::vector<at::Tensor> outputs,
                                           std::optional<c10::Device> device = std::nullopt) const;
  // A Work already complete (an operation that ran on the calling thread).
  c10::intrusive_ptr<c10d::Work> completedWork(c10d::OpType type, const std::vector<at::Tensor>& inputs,
                                               std::vector<at::Tensor> outputs);
  // The profiler's name of an operation: "<name>:<operation>", made once
  // per backend (makeTitles) for every OpType below titles_.size().
  const char* title(c10d::OpType type) const;
  void makeTitles();
  // The completion step of a call through pooled temporaries: `flat`
  // copied out to `outputs` in order, then `flat` and `temporaries` back
  // to the pool.
  Finish copyOutAndRelease(at::Tensor flat, std::vector<at::Tensor> outputs,
                           std::vector<at::Tensor> temporaries = {}) const;
  // reduce_scatter_tensor's call, with `after` run once it is done.
  c10::intrusive_ptr<c10d::Work> reduceScatterFlat(at::Tensor& output, at::Tensor& input,
                                                   const c10d::ReduceScatterOptions& opts, Finish after,
                                                   const char* what);
  // Throws, saying why, when there is no communicator to call: shut down,
  // or not formed yet (enable_reconfigure, before reconfigure).
  void requireComm(const char* what) const;
  void checkRoot(int64_t root, const char* what) const;
  void checkTag(int tag, const char* what) const;

  // The ids behind the handles this process has given out and no
  // reconfigure has used yet; their roots run until then.
  mutable std::mutex offeredMutex_;
  mutable std::vector<fwUniqueId> offered_;
  std::vector<int64_t> usedUuids_;  // reconfigure refuses one twice
  bool awaitingReconfigure_ = false;  // made deferred, not formed yet

  fwComm_t comm_ = nullptr;
  std::chrono::milliseconds timeout_;
  std::mutex callMutex_;  // Fairway numbers calls in call order: one caller at a time
  Completions completions_;  // finishes the host calls' Works
  std::atomic<uint64_t> collectives_{0};
  std::shared_ptr<TorchHooks> hooks_ = std::make_shared<TorchHooks>();
  // The list forms' temporaries; shared with the completion steps that return them.
  std::shared_ptr<ScratchPool> scratch_ = std::make_shared<ScratchPool>();
  c10::intrusive_ptr<c10d::Store> store_;  // the group's; monitored barriers meet there
  std::string name_;                        // torch's name for the backend
  std::array<const char*, 32> titles_{};    // by OpType (c10d's run 0 to about 20)
  const char* otherTitle_ = nullptr;        // any OpType past those
  uint64_t monitoredBarriers_ = 0;
  // Guarded by callMutex_, as the calls are.
  bool coalescing_ = false;  // between startCoalescing and endCoalescing
  std::vector<c10::intrusive_ptr<FairwayWork>> coalesced_;  // the region's Works so far
  std::optional<at::Device> coalescedDevice_;  // where the region's CUDA calls ran, if any
};

}  // namespace fairway_torch
