// Tensors as Fairway takes them: dtype and op mapping, the checks every
// operation makes, copies between a call's temporaries and the caller's
// tensors, and how a failure reaches torch.
#pragma once

#include <fairway/fairway.h>

#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "scratch_pool.h"

namespace fairway_torch {

// The calling thread's last Fairway error message, else the result's name.
std::string lastMessage(fwResult_t result);

// The Fairway type of a tensor. bool travels as bytes where the operation
// allows it (data movement, and the reductions below that keep 0/1).
fwDataType_t fwTypeOf(const at::Tensor& t);

// The Fairway op of a reduction on t; on bool tensors sum is logical or
// and product logical and. Unsupported ops raise ValueError.
fwRedOp_t fwOpOf(const c10d::ReduceOp& op, const at::Tensor& t);

// Dense, contiguous, on the CPU or a CUDA device, of a supported dtype;
// otherwise ValueError naming the operation.
void checkTensor(const at::Tensor& t, const char* what);

// One dtype and one device for every tensor of a call.
void checkSame(const at::Tensor& a, const at::Tensor& b, const char* what);

// The one tensor of a call that takes exactly one, checked.
const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* what);

// A tensor's element count, as Fairway's calls take it.
inline size_t count(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }

// Copies between a collective's temporaries and the caller's tensors (same
// dtype, same number of elements). On the CPU a plain memcpy on the calling
// thread: torch's copy_ and cat run on its intra-op thread pool, and when
// every rank of a node copies at the same moment, as they do right after a
// collective, those threads oversubscribe the cores and their barrier waits
// out scheduler time slices (2 ranks on 2 cores, 2 x 4 MiB: copy_ 14.5 ms
// median against 0.4 ms for one process alone). CUDA tensors keep copy_,
// which orders the copy on the current stream.
void copyInto(const at::Tensor& dst, const at::Tensor& src);

// Flattens same-typed tensors into one buffer from `scratch` (one
// collective instead of many).
at::Tensor flatten(const std::vector<at::Tensor>& tensors, ScratchPool& scratch);

// The reverse of flatten: flat's elements back into tensors, in order.
void unflattenInto(const at::Tensor& flat, std::vector<at::Tensor>& tensors);

// A call moves contiguous buffers. A tensor it reads that is not one (a
// view, such as a matrix's column) goes as a contiguous copy; one it
// writes is written through a contiguous temporary, listed in copyOut with
// the caller's tensor to copy it to once the call is done.
using CopyOutList = std::vector<std::pair<at::Tensor, at::Tensor>>;  // (written, caller's tensor)

inline at::Tensor readable(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

at::Tensor writable(const at::Tensor& t, CopyOutList* copyOut);

void copyOutAll(const CopyOutList& copyOut);

// torch's name for an operation, the second half of its profiler event's
// name ("fairway:all_reduce"), as torch's own backends name theirs.
const char* operationName(c10d::OpType type);

// Raises torch's DistBackendError (a RuntimeError in Python) with
// Fairway's own message, which names the failed rank where there is one.
[[noreturn]] void throwFairwayError(fwResult_t result, const std::string& what);
// The same with the message Fairway gave (fwGetLastErrorMessage where the
// failure was seen, which may be another thread).
[[noreturn]] void throwFairwayError(fwResult_t result, const std::string& what, const std::string& message);

// One Fairway operation on these buffers, as fwPost takes it; the caller
// sets what else its type takes (op, root, lists, compression, peer, tag).
inline fwOpArgs_t describe(fwOpType_t type, const void* send, void* recv, size_t count, fwDataType_t datatype) {
  fwOpArgs_t a = FW_OP_ARGS_INITIALIZER;
  a.type = type;
  a.sendbuff = send;
  a.recvbuff = recv;
  a.count = count;
  a.datatype = datatype;
  return a;
}

}  // namespace fairway_torch
