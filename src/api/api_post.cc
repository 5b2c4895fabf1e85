// fwPost: one operation described once (fwOpArgs_t), posted in the form the
// caller asks for: non-blocking with a request, else blocking on host
// buffers or stream-ordered on device buffers. The one place that maps a
// description to its C call, so bindings describe each operation once.
#include <cstddef>
#include <cstring>
#include <string>

#include "api/handles.h"
#include "core/errors.h"

using namespace fairway;

namespace {

const char* const kOpNames[] = {"allreduce", "reducescatter", "allgather", "broadcast", "reduce", "alltoall",
                                "alltoallv", "gather", "scatter", "barrier", "send", "recv"};
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == fwNumOpTypes, "a name per operation");

// What the description asks that no call of its type takes.
Status checkShape(const fwOpArgs_t& a, fwStream_t stream, fwRequest_t* request) {
  // The message is built only for a refusal: every call passes here.
  auto refuse = [&](const char* why) { return Status(fwInvalidUsage, std::string(kOpNames[a.type]) + ": " + why); };
  if (request != nullptr && stream != nullptr) {
    return refuse("a request and a stream together (non-blocking calls take host buffers, which no stream orders)");
  }
  const bool list = a.recvbuffs != nullptr || a.sendbuffs != nullptr;
  if (a.recvbuffs != nullptr && a.type != fwOpAllGather) return refuse("recvbuffs is allgather's list form");
  if (a.sendbuffs != nullptr && a.type != fwOpReduceScatter) return refuse("sendbuffs is reduce-scatter's list form");
  if (a.compression != nullptr) {
    if (a.type != fwOpAllReduce && a.type != fwOpReduceScatter && a.type != fwOpAllGather) {
      return refuse("compression applies to allreduce, reduce-scatter and allgather");
    }
    if (list) return refuse("the list forms have no compressed form");
  }
  return Status::ok();
}

// The call each description stands for, in the form asked.
fwResult_t dispatch(const fwOpArgs_t& a, fwComm_t comm, fwStream_t s, fwRequest_t* r) {
  const void* in = a.sendbuff;
  void* out = a.recvbuff;
  const size_t n = a.count;
  const fwDataType_t t = a.datatype;
  const fwCompression_t* c = a.compression;
  switch (a.type) {
    case fwOpAllReduce:
      if (c != nullptr) return r ? fwIallReduceCompressed(in, out, n, t, a.op, c, comm, r)
                                 : fwAllReduceCompressed(in, out, n, t, a.op, c, comm, s);
      return r ? fwIallReduce(in, out, n, t, a.op, comm, r) : fwAllReduce(in, out, n, t, a.op, comm, s);
    case fwOpReduceScatter:
      if (a.sendbuffs != nullptr) return r ? fwIreduceScatterList(a.sendbuffs, out, n, t, a.op, comm, r)
                                           : fwReduceScatterList(a.sendbuffs, out, n, t, a.op, comm, s);
      if (c != nullptr) return r ? fwIreduceScatterCompressed(in, out, n, t, a.op, c, comm, r)
                                 : fwReduceScatterCompressed(in, out, n, t, a.op, c, comm, s);
      return r ? fwIreduceScatter(in, out, n, t, a.op, comm, r) : fwReduceScatter(in, out, n, t, a.op, comm, s);
    case fwOpAllGather:
      if (a.recvbuffs != nullptr) return r ? fwIallGatherList(in, a.recvbuffs, n, t, comm, r)
                                           : fwAllGatherList(in, a.recvbuffs, n, t, comm, s);
      if (c != nullptr) return r ? fwIallGatherCompressed(in, out, n, t, c, comm, r)
                                 : fwAllGatherCompressed(in, out, n, t, c, comm, s);
      return r ? fwIallGather(in, out, n, t, comm, r) : fwAllGather(in, out, n, t, comm, s);
    case fwOpBroadcast:
      return r ? fwIbroadcast(in, out, n, t, a.root, comm, r) : fwBroadcast(in, out, n, t, a.root, comm, s);
    case fwOpReduce:
      return r ? fwIreduce(in, out, n, t, a.op, a.root, comm, r) : fwReduce(in, out, n, t, a.op, a.root, comm, s);
    case fwOpAllToAll:
      return r ? fwIallToAll(in, out, n, t, comm, r) : fwAllToAll(in, out, n, t, comm, s);
    case fwOpAllToAllv:
      return r ? fwIallToAllv(in, a.sendcounts, a.sdispls, out, a.recvcounts, a.rdispls, t, comm, r)
               : fwAllToAllv(in, a.sendcounts, a.sdispls, out, a.recvcounts, a.rdispls, t, comm, s);
    case fwOpGather:
      return r ? fwIgather(in, out, n, t, a.root, comm, r) : fwGather(in, out, n, t, a.root, comm, s);
    case fwOpScatter:
      return r ? fwIscatter(in, out, n, t, a.root, comm, r) : fwScatter(in, out, n, t, a.root, comm, s);
    case fwOpBarrier:
      return r ? fwIbarrier(comm, r) : fwBarrier(comm, s);
    case fwOpSend:
      return r ? fwIsendTagged(in, n, t, a.peer, a.tag, comm, r) : fwSendTagged(in, n, t, a.peer, a.tag, comm, s);
    case fwOpRecv:
      return r ? fwIrecvTagged(out, n, t, a.peer, a.tag, a.source, comm, r)
               : fwRecvTagged(out, n, t, a.peer, a.tag, a.source, comm, s);
    case fwNumOpTypes: break;
  }
  return reportToCaller(Status(fwInternalError, "fwPost: an operation type without a call"));
}

}  // namespace

extern "C" {

fwResult_t fwPost(const fwOpArgs_t* args, fwComm_t comm, fwStream_t stream, fwRequest_t* request) {
  if (request != nullptr) *request = nullptr;
  if (args == nullptr) return reportToCaller(Status(fwInvalidPointer, "fwPost: args is NULL"));
  // The fields this library reads must be there (a caller built against an
  // older header may pass a shorter struct: refused, never read past).
  if (args->size < offsetof(fwOpArgs_t, source) + sizeof(args->source) || args->size > (1u << 16)) {
    return reportToCaller(Status(fwInvalidArgument, "fwPost: args->size is " + std::to_string(args->size) +
                                                        " (start from FW_OP_ARGS_INITIALIZER)"));
  }
  // Read as the integer a C caller may have put there: an out-of-range
  // value is never loaded as the enum.
  int type = 0;
  static_assert(sizeof(type) == sizeof(args->type), "fwOpType_t is an int");
  std::memcpy(&type, &args->type, sizeof(type));
  if (type < 0 || type >= fwNumOpTypes) {
    return reportToCaller(Status(fwInvalidArgument, "fwPost: args->type " + std::to_string(type) +
                                                        " is not an operation (fwOpAllReduce to fwOpRecv)"));
  }
  const Status shape = checkShape(*args, stream, request);
  if (!shape.isOk()) return reportToCaller(shape.withContext("fwPost"));
  // The caller's number goes to the entry the dispatched call posts (a
  // caller built against an older header has no such field).
  const bool numbered = args->size >= offsetof(fwOpArgs_t, callerSequence) + sizeof(args->callerSequence) &&
                        args->callerSequence != 0;
  Communicator* impl = nullptr;
  if (numbered && lookupComm(comm, &impl).isOk()) impl->numberNextCall(args->callerSequence);
  return dispatch(*args, comm, stream, request);
}

}  // extern "C"
