#include "tensors.h"

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

std::string lastMessage(fwResult_t result) {
  const char* detail = fwGetLastErrorMessage();
  return detail != nullptr && detail[0] != '\0' ? detail : fwGetErrorString(result);
}

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

void copyInto(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.is_cpu() && src.is_cpu() && dst.is_contiguous() && src.is_contiguous()) {
    std::memcpy(dst.data_ptr(), src.data_ptr(), src.nbytes());
  } else {
    dst.copy_(src.view(dst.sizes()));
  }
}

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

at::Tensor writable(const at::Tensor& t, CopyOutList* copyOut) {
  if (t.is_contiguous()) return t;
  at::Tensor staged = at::empty(t.sizes(), t.options());
  copyOut->emplace_back(staged, t);
  return staged;
}

void copyOutAll(const CopyOutList& copyOut) {
  for (const auto& [written, caller] : copyOut) caller.copy_(written);
}

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

void throwFairwayError(fwResult_t result, const std::string& what) {
  throwFairwayError(result, what, lastMessage(result));
}

void throwFairwayError(fwResult_t result, const std::string& what, const std::string& message) {
  // torch and its users recognise a timeout by the words " Timed out "
  // (torch's suite matches " (Timed out|closed|timeout) ").
  const char* kind = result == fwTimeout ? " Timed out waiting for its peers: " : " ";
  TORCH_CHECK_WITH(DistBackendError, false, "fairway: ", what, " failed:", kind,
                   message.empty() ? std::string(fwGetErrorString(result)) : message, " (", fwGetErrorString(result),
                   ")");
}

}  // namespace fairway_torch
