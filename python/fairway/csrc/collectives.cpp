// The collectives on one tensor or one list per rank: broadcast,
// allreduce, reduce, allgather, gather, scatter, reduce-scatter.
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

c10::intrusive_ptr<c10d::Work> FairwayBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                         const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(tensors, "broadcast");
  checkRoot(opts.rootRank, "broadcast");
  const int root = static_cast<int>(opts.rootRank);
  fwOpArgs_t call = describe(fwOpBroadcast, t.data_ptr(), t.data_ptr(), count(t), fwTypeOf(t));
  call.root = root;
  return launch(c10d::OpType::BROADCAST, t, tensors, call, nullptr, "broadcast", opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::AllreduceOptions& opts) {
  if (tensors.size() == 1 && tensors[0].layout() == at::kSparse) return allreduceSparse(tensors[0], opts);
  const at::Tensor& t = single(tensors, "allreduce");
  const fwRedOp_t op = fwOpOf(opts.reduceOp, t);
  fwOpArgs_t call = describe(fwOpAllReduce, t.data_ptr(), t.data_ptr(), count(t), fwTypeOf(t));
  call.op = op;
  return launch(c10d::OpType::ALLREDUCE, t, tensors, call, nullptr, "allreduce", opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::reduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  checkRoot(opts.rootRank, "reduce");
  const fwRedOp_t op = fwOpOf(opts.reduceOp, t);
  const int root = static_cast<int>(opts.rootRank);
  // torch's reduce is in place on every rank; only the root's result is defined.
  fwOpArgs_t call = describe(fwOpReduce, t.data_ptr(), t.data_ptr(), count(t), fwTypeOf(t));
  call.op = op;
  call.root = root;
  return launch(c10d::OpType::REDUCE, t, tensors, call, nullptr, "reduce", opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::all_gather_single(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& opts) {
  checkTensor(input, "all_gather_into_tensor");
  checkTensor(output, "all_gather_into_tensor");
  checkSame(input, output, "all_gather_into_tensor");
  TORCH_CHECK_VALUE(output.numel() == input.numel() * getSize(), "fairway: all_gather_into_tensor: output has ",
                    output.numel(), " elements, not ", getSize(), " x ", input.numel());
  const fwOpArgs_t call = describe(fwOpAllGather, input.data_ptr(), output.data_ptr(), count(input), fwTypeOf(input));
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
    fwOpArgs_t call = describe(fwOpAllGather, input.data_ptr(), nullptr, count(input), fwTypeOf(input));
    call.recvbuffs = blocks.data();
    Finish finish = [input, targets, copyOut]() { copyOutAll(copyOut); };  // the tensors alive until done
    return launch(c10d::OpType::ALLGATHER, in, outputs[0], call, finish, "all_gather", opts.asyncOp);
  }
  at::Tensor flat = scratch_->take(static_cast<int64_t>(in.numel()) * getSize(), in.options());
  const fwOpArgs_t call = describe(fwOpAllGather, input.data_ptr(), flat.data_ptr(), count(input), fwTypeOf(input));
  auto out = outputs[0];
  Finish finish = [input, copyOut = copyOutAndRelease(flat, out)]() { copyOut(); };  // input alive until done
  return launch(c10d::OpType::ALLGATHER, in, outputs[0], call, finish, "all_gather", opts.asyncOp);
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
  fwOpArgs_t call =
      describe(fwOpGather, input.data_ptr(), isRoot ? flat.data_ptr() : nullptr, count(input), fwTypeOf(input));
  call.root = root;
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
  fwOpArgs_t call =
      describe(fwOpScatter, isRoot ? flat.data_ptr() : nullptr, output.data_ptr(), count(output), fwTypeOf(output));
  call.root = root;
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
  fwOpArgs_t call =
      describe(fwOpReduceScatter, input.data_ptr(), output.data_ptr(), count(output), fwTypeOf(input));
  call.op = op;
  // The input lives until the call is done.
  Finish finish = [input, after]() {
    if (after) after();
  };
  return launch(c10d::OpType::_REDUCE_SCATTER_BASE, input, std::vector<at::Tensor>{output}, call, finish, what,
                opts.asyncOp);
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
    fwOpArgs_t call = describe(fwOpReduceScatter, nullptr, output.data_ptr(), count(output), fwTypeOf(output));
    call.op = op;
    call.sendbuffs = blocks.data();
    return launch(c10d::OpType::REDUCE_SCATTER, output, outputs, call, [sources]() {} /* alive until done */,
                  "reduce_scatter", opts.asyncOp, inputs[0]);
  }
  at::Tensor flat = flatten(inputs[0], *scratch_);
  return reduceScatterFlat(output, flat, opts, [flat, scratch = scratch_]() { scratch->give(flat); },
                           "reduce_scatter");
}

}  // namespace fairway_torch
