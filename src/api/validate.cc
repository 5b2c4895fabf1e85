#include "api/validate.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "collective/operations.h"
#include "core/datatype.h"

namespace fairway {
namespace {

// The largest buffer any call may describe; beyond it byte offsets overflow.
constexpr size_t kMaxBytes = static_cast<size_t>(PTRDIFF_MAX);

// Each check below is a comparison on the success path; its message is
// built out of line, only on failure (a valid call costs a few
// nanoseconds of checks, not a function call and a Status per rule). The
// compiler takes a branch to a cold function as unlikely.

// The enums have int as their underlying type in C++ (fairway.h), so a
// caller's out-of-range value is read as the int it is and refused here,
// before anything switches on it.
[[gnu::cold, gnu::noinline]] Status badDatatype(int raw) {
  return Status(fwInvalidDatatype, "datatype " + std::to_string(raw) + " is not a fwDataType_t (0.." +
                                       std::to_string(fwNumTypes - 1) + ")");
}
inline Status checkDatatype(fwDataType_t datatype) {
  if (!isValidDatatype(static_cast<int>(datatype))) return badDatatype(static_cast<int>(datatype));
  return Status::ok();
}

[[gnu::cold, gnu::noinline]] Status badOp(fwRedOp_t op, fwDataType_t datatype) {
  const int raw = static_cast<int>(op);
  if (!isValidOp(raw)) {
    return Status(fwInvalidOp, "op " + std::to_string(raw) + " is not a fwRedOp_t (0.." +
                                   std::to_string(fwNumOps - 1) + ")");
  }
  return Status(fwOpNotSupportedForType, std::string("op ") + opName(op) + " is not defined for datatype " +
                                             datatypeName(datatype) + " (bitwise ops take integer types)");
}
inline Status checkOp(fwRedOp_t op, fwDataType_t datatype) {
  if (!isValidOp(static_cast<int>(op)) || !isOpDefinedFor(op, datatype)) return badOp(op, datatype);
  return Status::ok();
}

[[gnu::cold, gnu::noinline]] Status overflowingCount(size_t count, size_t multiplier, fwDataType_t datatype,
                                                     const char* countName) {
  return Status(fwInvalidCount, std::string(countName) + "=" + std::to_string(count) +
                                    (multiplier > 1 ? " times " + std::to_string(multiplier) + " ranks" : "") +
                                    " elements of " + datatypeName(datatype) + " overflows the address space");
}
// count * multiplier * element size, failing if it overflows.
inline Status bytesOf(size_t count, size_t multiplier, fwDataType_t datatype, const char* countName, size_t* bytes) {
  size_t elements = 0;
  if (__builtin_mul_overflow(count, multiplier, &elements) ||
      __builtin_mul_overflow(elements, datatypeSize(datatype), bytes) || *bytes > kMaxBytes) {
    return overflowingCount(count, multiplier, datatype, countName);
  }
  return Status::ok();
}

[[gnu::cold, gnu::noinline]] Status nullBuffer(size_t bytes, const char* name) {
  return Status(fwInvalidPointer, std::string(name) + " is NULL but " + std::to_string(bytes) + " bytes are needed");
}
inline Status checkBuffer(const void* buf, size_t bytes, const char* name) {
  if (buf == nullptr && bytes > 0) return nullBuffer(bytes, name);
  return Status::ok();
}

[[gnu::cold, gnu::noinline]] Status badRank(int rank, int nranks, const char* name) {
  return Status(fwInvalidRank, std::string(name) + " " + std::to_string(rank) + " is not a rank of this " +
                                   std::to_string(nranks) + "-rank communicator");
}
inline Status checkRank(int rank, int nranks, const char* name) {
  if (rank < 0 || rank >= nranks) return badRank(rank, nranks, name);
  return Status::ok();
}

[[gnu::cold, gnu::noinline]] Status overlapping(const char* inPlaceRule) {
  return Status(fwInvalidArgument, std::string("sendbuff and recvbuff overlap without being in place (") + inPlaceRule +
                                       ")");
}
// Buffers a and b must not overlap, unless a starts exactly at inPlaceA:
// the one overlap each collective defines as in place.
inline Status checkOverlap(const void* a, size_t aBytes, const void* b, size_t bBytes, const void* inPlaceA,
                           const char* inPlaceRule) {
  if (a == nullptr || b == nullptr || aBytes == 0 || bBytes == 0) return Status::ok();
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  bool overlap = x < y + bBytes && y < x + aBytes;
  if (!overlap || (inPlaceA != nullptr && a == inPlaceA)) return Status::ok();
  return overlapping(inPlaceRule);
}

Status validatePlainCollective(const CollectiveArgs& a, int rank, int n);

// "list[q]", for a message about one block of a list form.
[[gnu::cold, gnu::noinline]] std::string nameOf(const char* list, size_t q) {
  return std::string(list) + "[" + std::to_string(q) + "]";
}

// A list form's blocks, `bytes` each: none NULL, none overlapping another
// (they are written, or read as one rank's share each). Sorted, so a
// large communicator's check stays n log n.
template <typename Block>
Status checkBlockList(const std::vector<Block>& blocks, size_t bytes, const char* list) {
  if (bytes == 0) return Status::ok();
  std::vector<std::pair<uintptr_t, size_t>> sorted;
  sorted.reserve(blocks.size());
  for (size_t q = 0; q < blocks.size(); ++q) {
    if (blocks[q] == nullptr) return nullBuffer(bytes, nameOf(list, q).c_str());
    sorted.emplace_back(reinterpret_cast<uintptr_t>(blocks[q]), q);
  }
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i].first - sorted[i - 1].first < bytes) {
      return Status(fwInvalidArgument, nameOf(list, sorted[i - 1].second) + " and " + nameOf(list, sorted[i].second) +
                                           " overlap (each rank's block needs " + std::to_string(bytes) +
                                           " bytes of its own)");
    }
  }
  return Status::ok();
}

// The one buffer of a list form against its blocks: it may be exactly
// block `rank` (in place) and overlap no other.
template <typename Block>
Status checkAgainstBlocks(const void* buf, const char* bufName, const std::vector<Block>& blocks, size_t bytes,
                          int rank, const char* list) {
  for (size_t q = 0; q < blocks.size(); ++q) {
    if (static_cast<int>(q) == rank && blocks[q] == buf) continue;
    if (!checkOverlap(buf, bytes, blocks[q], bytes, nullptr, "").isOk()) {
      return Status(fwInvalidArgument, std::string(bufName) + " overlaps " + nameOf(list, q) + " (in place means " +
                                           bufName + " == " + nameOf(list, static_cast<size_t>(rank)) + ")");
    }
  }
  return Status::ok();
}

// fwAllGatherList and fwReduceScatterList: n blocks of count elements.
Status validateListCollective(const CollectiveArgs& a, int rank, size_t one) {
  if (a.kind == CollectiveKind::AllGather) {
    FW_RETURN_IF_ERROR(checkBuffer(a.send, one, "sendbuff"));
    FW_RETURN_IF_ERROR(checkBlockList(a.recvBlocks, one, "recvbuffs"));
    return checkAgainstBlocks(a.send, "sendbuff", a.recvBlocks, one, rank, "recvbuffs");
  }
  FW_RETURN_IF_ERROR(checkOp(a.op, a.datatype));
  FW_RETURN_IF_ERROR(checkBlockList(a.sendBlocks, one, "sendbuffs"));
  FW_RETURN_IF_ERROR(checkBuffer(a.recv, one, "recvbuff"));
  return checkAgainstBlocks(a.recv, "recvbuff", a.sendBlocks, one, rank, "sendbuffs");
}

Status validateAllToAllv(const CollectiveArgs& a, int rank, int n) {
  if (a.sendcounts == nullptr || a.sdispls == nullptr || a.recvcounts == nullptr || a.rdispls == nullptr) {
    return Status(fwInvalidPointer, "alltoallv needs sendcounts, sdispls, recvcounts and rdispls, one per rank");
  }
  size_t sendExtent = 0, recvExtent = 0;
  for (int i = 0; i < n; ++i) {
    size_t end = 0;
    std::string idx = "[" + std::to_string(i) + "]";
    if (__builtin_add_overflow(a.sdispls[i], a.sendcounts[i], &end)) {
      return Status(fwInvalidCount, "sdispls" + idx + " + sendcounts" + idx + " overflows");
    }
    sendExtent = std::max(sendExtent, end);
    if (__builtin_add_overflow(a.rdispls[i], a.recvcounts[i], &end)) {
      return Status(fwInvalidCount, "rdispls" + idx + " + recvcounts" + idx + " overflows");
    }
    recvExtent = std::max(recvExtent, end);
  }
  if (a.sendcounts[rank] != a.recvcounts[rank]) {
    std::string idx = "[" + std::to_string(rank) + "]";
    return Status(fwInvalidCount, "sendcounts" + idx + " != recvcounts" + idx + " on rank " + std::to_string(rank) +
                                      ": a rank's block to itself must fit");
  }
  size_t sendBytes = 0, recvBytes = 0;
  FW_RETURN_IF_ERROR(bytesOf(sendExtent, 1, a.datatype, "sendcounts/sdispls extent", &sendBytes));
  FW_RETURN_IF_ERROR(bytesOf(recvExtent, 1, a.datatype, "recvcounts/rdispls extent", &recvBytes));
  FW_RETURN_IF_ERROR(checkBuffer(a.send, sendBytes, "sendbuff"));
  FW_RETURN_IF_ERROR(checkBuffer(a.recv, recvBytes, "recvbuff"));
  return checkOverlap(a.send, sendBytes, a.recv, recvBytes, nullptr, "alltoallv has no in-place form");
}

Status unsupported(const std::string& why) { return Status(fwUnsupportedCompression, why); }

// The combination of a valid descriptor with a collective, type and op:
// checked after the plain collective's own rules, so those keep their codes.
Status validateCompression(const CollectiveArgs& a, int rank, int n) {
  const Compression& c = a.compression;
  const char* name = compressionName(c.kind);
  const OperationRow& operation = operationRow(a.kind);
  const bool reduces = operation.reduces;
  if (!operation.compresses) {
    return unsupported(std::string(collectiveName(a.kind)) + " has no compressed form (allreduce, reducescatter "
                                                             "and allgather have)");
  }
  if (a.kind == CollectiveKind::AllGather && c.blockwise()) {
    return unsupported(std::string("allgather compresses with the fp16 and bf16 casts only, not ") + name +
                       " (nothing reduces the blocks' error there)");
  }
  if (a.datatype != fwFloat32 && a.datatype != fwFloat16 && a.datatype != fwBfloat16) {
    return unsupported(std::string(name) + " compression takes fwFloat32, fwFloat16 or fwBfloat16 data, not " +
                       datatypeName(a.datatype));
  }
  if (reduces && a.op != fwSum && a.op != fwAvg) {
    return unsupported(std::string(name) + " compression reduces with sum or avg, not " + opName(a.op));
  }
  if (c.residual == nullptr) return Status::ok();
  if (!reduces) return unsupported("allgather takes no error-feedback residual (it reduces nothing)");
  size_t sendBytes = 0, recvBytes = 0;
  bufferBytes(a, rank, n, &sendBytes, &recvBytes);
  const size_t inputElements = sendBytes / datatypeSize(a.datatype);
  size_t residualBytes = 0;
  if (__builtin_mul_overflow(inputElements, sizeof(float), &residualBytes) || residualBytes > kMaxBytes) {
    return Status(fwInvalidCount, "the residual of " + std::to_string(inputElements) +
                                      " float32 values overflows the address space");
  }
  for (const auto& [buffer, bytes, name] : {std::tuple{a.send, sendBytes, "sendbuff"},
                                            std::tuple{static_cast<const void*>(a.recv), recvBytes, "recvbuff"}}) {
    if (!checkOverlap(c.residual, residualBytes, buffer, bytes, nullptr, "").isOk()) {
      return Status(fwInvalidArgument, std::string("the residual overlaps ") + name + " (it must be a buffer of its own)");
    }
  }
  return Status::ok();
}

}  // namespace

Status readCompression(const fwCompression_t* user, Compression* out) {
  if (user == nullptr) return Status(fwInvalidPointer, "compression is NULL (pass FW_COMPRESSION_INITIALIZER's value)");
  if (user->size < offsetof(fwCompression_t, residual) + sizeof(user->residual) || user->size > (1u << 16)) {
    return Status(fwInvalidArgument, "compression->size is " + std::to_string(user->size) + ", not sizeof(" +
                                         "fwCompression_t) = " + std::to_string(sizeof(fwCompression_t)) +
                                         " (start from FW_COMPRESSION_INITIALIZER)");
  }
  const int kind = static_cast<int>(user->kind);
  if (kind < 0 || kind >= fwNumCompressions) {
    return unsupported("compression kind " + std::to_string(kind) + " is not a fwCompressKind_t (0.." +
                       std::to_string(fwNumCompressions - 1) + ")");
  }
  Compression c;
  c.kind = user->kind;
  c.residual = user->residual;
  if (c.blockwise()) {
    const int block = user->blockSize == 0 ? kDefaultCompressionBlock : user->blockSize;
    if (!isValidCompressionBlock(block)) {
      return unsupported("block size " + std::to_string(user->blockSize) + " is not a power of two from 32 to 4096");
    }
    c.blockSize = block;
  }
  *out = c;
  return Status::ok();
}

Status validateHostStream(fwStream_t stream) {
  if (stream != nullptr) {
    return Status(fwInvalidUsage, "stream is not NULL but the buffers are host memory: host buffers take a NULL "
                                  "stream (streams order device buffers)");
  }
  return Status::ok();
}

Status validatePointToPoint(const void* buf, size_t count, fwDataType_t datatype, int peer, int nranks,
                            const char* bufName) {
  FW_RETURN_IF_ERROR(checkDatatype(datatype));
  size_t bytes = 0;
  FW_RETURN_IF_ERROR(bytesOf(count, 1, datatype, "count", &bytes));
  FW_RETURN_IF_ERROR(checkBuffer(buf, bytes, bufName));
  return checkRank(peer, nranks, "peer");
}

Status validateCollective(const CollectiveArgs& a, int rank, int n) {
  FW_RETURN_IF_ERROR(validatePlainCollective(a, rank, n));
  return a.compression.active() ? validateCompression(a, rank, n) : Status::ok();
}

namespace {
Status validatePlainCollective(const CollectiveArgs& a, int rank, int n) {
  if (a.kind == CollectiveKind::Barrier) return Status::ok();
  FW_RETURN_IF_ERROR(checkDatatype(a.datatype));
  const size_t es = datatypeSize(a.datatype);
  auto shifted = [&](const void* base, size_t elems) -> const void* {
    return base ? static_cast<const char*>(base) + elems * es : nullptr;
  };
  size_t one = 0, all = 0;  // bytes of count elements, and of n blocks of them
  if (a.kind != CollectiveKind::AllToAllv) {
    FW_RETURN_IF_ERROR(bytesOf(a.count, 1, a.datatype, "count", &one));
    FW_RETURN_IF_ERROR(bytesOf(a.count, static_cast<size_t>(n), a.datatype, "count", &all));
  }
  if (a.listForm()) return validateListCollective(a, rank, one);
  switch (a.kind) {
    case CollectiveKind::AllReduce:
      FW_RETURN_IF_ERROR(checkOp(a.op, a.datatype));
      FW_RETURN_IF_ERROR(checkBuffer(a.send, one, "sendbuff"));
      FW_RETURN_IF_ERROR(checkBuffer(a.recv, one, "recvbuff"));
      return checkOverlap(a.send, one, a.recv, one, a.recv, "in place means sendbuff == recvbuff");
    case CollectiveKind::ReduceScatter:
      FW_RETURN_IF_ERROR(checkOp(a.op, a.datatype));
      FW_RETURN_IF_ERROR(checkBuffer(a.send, all, "sendbuff"));
      FW_RETURN_IF_ERROR(checkBuffer(a.recv, one, "recvbuff"));
      return checkOverlap(a.recv, one, a.send, all, shifted(a.send, a.count * rank),
                          "in place means recvbuff == sendbuff + rank * recvcount");
    case CollectiveKind::AllGather:
      FW_RETURN_IF_ERROR(checkBuffer(a.send, one, "sendbuff"));
      FW_RETURN_IF_ERROR(checkBuffer(a.recv, all, "recvbuff"));
      return checkOverlap(a.send, one, a.recv, all, shifted(a.recv, a.count * rank),
                          "in place means sendbuff == recvbuff + rank * sendcount");
    case CollectiveKind::Broadcast:
      FW_RETURN_IF_ERROR(checkRank(a.root, n, "root"));
      if (rank == a.root) FW_RETURN_IF_ERROR(checkBuffer(a.send, one, "sendbuff (on root)"));
      FW_RETURN_IF_ERROR(checkBuffer(a.recv, one, "recvbuff"));
      if (rank != a.root) return Status::ok();
      return checkOverlap(a.send, one, a.recv, one, a.recv, "in place means sendbuff == recvbuff");
    case CollectiveKind::Reduce:
      FW_RETURN_IF_ERROR(checkRank(a.root, n, "root"));
      FW_RETURN_IF_ERROR(checkOp(a.op, a.datatype));
      FW_RETURN_IF_ERROR(checkBuffer(a.send, one, "sendbuff"));
      if (rank != a.root) return Status::ok();
      FW_RETURN_IF_ERROR(checkBuffer(a.recv, one, "recvbuff (on root)"));
      return checkOverlap(a.send, one, a.recv, one, a.recv, "in place means sendbuff == recvbuff");
    case CollectiveKind::AllToAll:
      FW_RETURN_IF_ERROR(checkBuffer(a.send, all, "sendbuff"));
      FW_RETURN_IF_ERROR(checkBuffer(a.recv, all, "recvbuff"));
      return checkOverlap(a.send, all, a.recv, all, a.recv, "in place means sendbuff == recvbuff");
    case CollectiveKind::AllToAllv:
      return validateAllToAllv(a, rank, n);
    case CollectiveKind::Gather:
      FW_RETURN_IF_ERROR(checkRank(a.root, n, "root"));
      FW_RETURN_IF_ERROR(checkBuffer(a.send, one, "sendbuff"));
      if (rank != a.root) return Status::ok();
      FW_RETURN_IF_ERROR(checkBuffer(a.recv, all, "recvbuff (on root)"));
      return checkOverlap(a.send, one, a.recv, all, shifted(a.recv, a.count * rank),
                          "in place means sendbuff == recvbuff + root * sendcount");
    case CollectiveKind::Scatter:
      FW_RETURN_IF_ERROR(checkRank(a.root, n, "root"));
      FW_RETURN_IF_ERROR(checkBuffer(a.recv, one, "recvbuff"));
      if (rank != a.root) return Status::ok();
      FW_RETURN_IF_ERROR(checkBuffer(a.send, all, "sendbuff (on root)"));
      return checkOverlap(a.recv, one, a.send, all, shifted(a.send, a.count * rank),
                          "in place means recvbuff == sendbuff + root * recvcount");
    case CollectiveKind::Barrier:
      break;
  }
  return Status::ok();
}

}  // namespace

}  // namespace fairway
