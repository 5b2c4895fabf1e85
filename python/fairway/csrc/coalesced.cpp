// Coalesced and compressed forms: several tensors in one Fairway call, a
// coalescing region's Works as one, and the compressed allreduce and
// reduce-scatter fairway.torch.compression reaches.
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

c10::intrusive_ptr<c10d::Work> FairwayBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                   const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK_VALUE(!tensors.empty(), "fairway: allreduce_coalesced takes at least one tensor");
  for (const at::Tensor& t : tensors) {
    checkTensor(t, "allreduce_coalesced");
    checkSame(t, tensors[0], "allreduce_coalesced");
  }
  const fwRedOp_t op = fwOpOf(opts.reduceOp, tensors[0]);
  at::Tensor flat = flatten(tensors, *scratch_);
  fwOpArgs_t call = describe(fwOpAllReduce, flat.data_ptr(), flat.data_ptr(), count(flat), fwTypeOf(flat));
  call.op = op;
  auto out = tensors;
  Finish finish = copyOutAndRelease(flat, out);
  return launch(c10d::OpType::ALLREDUCE_COALESCED, flat, tensors, call, finish, "allreduce_coalesced",
                opts.asyncOp, tensors);
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
  const fwOpArgs_t call =
      describe(fwOpAllGather, packed.data_ptr(), gathered.data_ptr(), count(packed), fwTypeOf(packed));
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
  const fwOpArgs_t call =
      describe(fwOpAllGather, packed.data_ptr(), gathered.data_ptr(), count(packed), fwTypeOf(packed));
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

c10::intrusive_ptr<c10d::Work> FairwayBackend::allreduceCompressed(at::Tensor& tensor, fwCompressKind_t kind,
                                                                   int blockSize, const at::Tensor& residual,
                                                                   bool average, bool asyncOp) {
  checkTensor(tensor, "all_reduce_compressed");
  const fwCompression_t c = compressionOf(kind, blockSize, residual, tensor, "all_reduce_compressed");
  const fwRedOp_t op = average ? fwAvg : fwSum;
  const at::Tensor& t = tensor;
  fwOpArgs_t call = describe(fwOpAllReduce, t.data_ptr(), t.data_ptr(), count(t), fwTypeOf(t));
  call.op = op;
  call.compression = &c;
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
  fwOpArgs_t call =
      describe(fwOpReduceScatter, input.data_ptr(), output.data_ptr(), count(output), fwTypeOf(input));
  call.op = op;
  call.compression = &c;
  return launch(c10d::OpType::_REDUCE_SCATTER_BASE, input, std::vector<at::Tensor>{output}, call,
                [input, residual]() {} /* alive until done */, what, asyncOp);
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
  fwOpArgs_t call =
      describe(fwOpReduceScatter, packed.data_ptr(), reduced.data_ptr(), count(reduced), fwTypeOf(packed));
  call.op = op;
  auto out = outputs;
  Finish finish = copyOutAndRelease(reduced, out, {packed});
  return launch(c10d::OpType::COALESCED, packed, outputs, call, finish, "reduce_scatter_tensor_coalesced",
                opts.asyncOp, inputs);
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
  requireComm("endCoalescing");
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

}  // namespace fairway_torch
