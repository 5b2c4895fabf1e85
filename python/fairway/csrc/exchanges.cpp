// Operations that move blocks between pairs of ranks: all-to-all,
// send/recv, barriers, and the sparse allreduce built from allgathers.
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
  fwOpArgs_t call = describe(fwOpAllToAllv, input.data_ptr(), output.data_ptr(), 0, fwTypeOf(input));
  call.sendcounts = send->first.data();
  call.sdispls = send->second.data();
  call.recvcounts = recv->first.data();
  call.rdispls = recv->second.data();
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
  fwOpArgs_t call = describe(fwOpSend, t.data_ptr(), nullptr, count(t), fwTypeOf(t));
  call.peer = dstRank;
  call.tag = t.is_cuda() ? 0 : tag;
  return launch(c10d::OpType::SEND, t, tensors, call, nullptr, "send", true);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  const at::Tensor& t = single(tensors, "recv");
  TORCH_CHECK_VALUE(srcRank >= 0 && srcRank < getSize(), "fairway: recv from rank ", srcRank,
                    ", not a rank of this group of ", getSize());
  checkTag(tag, "recv");
  fwOpArgs_t call = describe(fwOpRecv, nullptr, t.data_ptr(), count(t), fwTypeOf(t));
  call.peer = srcRank;
  call.tag = t.is_cuda() ? 0 : tag;
  return launch(c10d::OpType::RECV, t, tensors, call, nullptr, "recv", true);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  const at::Tensor& t = single(tensors, "recv");
  TORCH_CHECK_VALUE(!t.is_cuda(), "fairway: a receive from any source takes a CPU tensor (device messages are "
                                  "matched in call order from a named rank)");
  checkTag(tag, "recv");
  // Written by Fairway when the receive completes, before the Work does.
  auto source = std::make_shared<int>(-1);
  fwOpArgs_t call = describe(fwOpRecv, nullptr, t.data_ptr(), count(t), fwTypeOf(t));
  call.peer = FAIRWAY_ANY_SOURCE;
  call.tag = tag;
  call.source = source.get();
  auto work = launch(c10d::OpType::RECVANYSOURCE, t, tensors, call, nullptr, "recv", true);
  static_cast<FairwayWork*>(work.get())->reportSource(std::move(source));
  return work;
}

void FairwayBackend::checkTag(int tag, const char* what) const {
  TORCH_CHECK_VALUE(tag >= 0 && tag < kExchangeTag, "fairway: ", what, " with tag ", tag, ": tags run from 0 to ",
                    kExchangeTag - 1);
}

c10::intrusive_ptr<c10d::Work> FairwayBackend::barrier(const c10d::BarrierOptions& opts) {
  fwOpArgs_t call = describe(fwOpBarrier, nullptr, nullptr, 0, fwUint8);
  call.callerSequence = ++collectives_;
  return runHost(c10d::OpType::BARRIER, {}, {}, call, nullptr, "barrier", opts.asyncOp);
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
    const fwOpArgs_t call = describe(fwOpAllGather, input.data_ptr(), out.data_ptr(), count(input), fwTypeOf(input));
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

}  // namespace fairway_torch
