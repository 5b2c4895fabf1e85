// fwPost: one operation described once (fwOpArgs_t), posted in the form the
// caller asks for: non-blocking with a request, else blocking on host
// buffers or stream-ordered on device buffers. Its shape is checked here
// against the operation table (collective/operations.h); a collective is
// read into the CollectiveArgs its entry points build and run by the same
// code (postCollective), a message goes to its tagged call.
#include <cstddef>
#include <cstring>
#include <string>

#include "api/handles.h"
#include "api/post_collective.h"
#include "collective/operations.h"
#include "core/errors.h"

using namespace fairway;

namespace {

// What the description asks that no call of its type takes.
Status checkShape(const fwOpArgs_t& a, fwStream_t stream, fwRequest_t* request) {
  // The message is built only for a refusal: every call passes here.
  const OperationRow& operation = operationRow(a.type);
  auto refuse = [&](const char* why) { return Status(fwInvalidUsage, std::string(operation.name) + ": " + why); };
  if (request != nullptr && stream != nullptr) {
    return refuse("a request and a stream together (non-blocking calls take host buffers, which no stream orders)");
  }
  const bool list = a.recvbuffs != nullptr || a.sendbuffs != nullptr;
  if (a.recvbuffs != nullptr && a.type != fwOpAllGather) return refuse("recvbuffs is allgather's list form");
  if (a.sendbuffs != nullptr && a.type != fwOpReduceScatter) return refuse("sendbuffs is reduce-scatter's list form");
  if (a.compression != nullptr) {
    if (!operation.compresses) return refuse("compression applies to allreduce, reduce-scatter and allgather");
    if (list) return refuse("the list forms have no compressed form");
  }
  return Status::ok();
}

// Messages, each in the form asked; collectives go to postCollective.
fwResult_t postMessage(const fwOpArgs_t& a, fwComm_t comm, fwStream_t s, fwRequest_t* r) {
  const void* in = a.sendbuff;
  void* out = a.recvbuff;
  const size_t n = a.count;
  const fwDataType_t t = a.datatype;
  if (a.type == fwOpSend) {
    return r ? fwIsendTagged(in, n, t, a.peer, a.tag, comm, r) : fwSendTagged(in, n, t, a.peer, a.tag, comm, s);
  }
  return r ? fwIrecvTagged(out, n, t, a.peer, a.tag, a.source, comm, r)
           : fwRecvTagged(out, n, t, a.peer, a.tag, a.source, comm, s);
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
  if (operationRow(args->type).collective) return postCollective(*args, comm, stream, request);
  return postMessage(*args, comm, stream, request);
}

}  // extern "C"
