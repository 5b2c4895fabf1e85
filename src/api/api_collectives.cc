// C entry points for collectives (point-to-point messages: api_messages.cc;
// requests: api_requests.cc).
// Each builds a CollectiveArgs, validates it, and runs it now or queues it.
#include "api/handles.h"
#include "api/post_collective.h"
#include "api/validate.h"
#include "collective/operations.h"
#include "core/datatype.h"
#include "core/errors.h"

using namespace fairway;

namespace {

CollectiveArgs makeAllToAllv(const void* send, const size_t* sendcounts, const size_t* sdispls, void* recv,
                             const size_t* recvcounts, const size_t* rdispls, fwDataType_t datatype) {
  CollectiveArgs a = makeArgs(CollectiveKind::AllToAllv, send, recv, 0, datatype);
  a.sendcounts = sendcounts;
  a.sdispls = sdispls;
  a.recvcounts = recvcounts;
  a.rdispls = rdispls;
  return a;
}

// A list form's arguments: the caller's array of one block address per
// rank, copied (a non-blocking call must not hold on to it). A NULL array
// leaves the list empty, which validation refuses.
template <typename Block>
Status readBlockList(fwComm_t comm, Block const* list, const char* name, std::vector<Block>* out) {
  Communicator* impl = nullptr;
  FW_RETURN_IF_ERROR(lookupComm(comm, &impl));
  if (list == nullptr) {
    return Status(fwInvalidPointer, std::string(name) + " is NULL (it holds one buffer per rank: " +
                                        std::to_string(impl->size()) + ")");
  }
  out->assign(list, list + impl->size());
  return Status::ok();
}

Status readAllGatherList(fwComm_t comm, const void* send, void* const* recvbuffs, size_t count,
                         fwDataType_t datatype, CollectiveArgs* args) {
  *args = makeArgs(CollectiveKind::AllGather, send, nullptr, count, datatype);
  std::vector<void*> blocks;
  FW_RETURN_IF_ERROR(readBlockList(comm, recvbuffs, "recvbuffs", &blocks));
  for (void* b : blocks) args->recvBlocks.push_back(static_cast<char*>(b));
  return Status::ok();
}

Status readReduceScatterList(fwComm_t comm, const void* const* sendbuffs, void* recv, size_t count,
                             fwDataType_t datatype, fwRedOp_t op, CollectiveArgs* args) {
  *args = makeArgs(CollectiveKind::ReduceScatter, nullptr, recv, count, datatype, op);
  std::vector<const void*> blocks;
  FW_RETURN_IF_ERROR(readBlockList(comm, sendbuffs, "sendbuffs", &blocks));
  for (const void* b : blocks) args->sendBlocks.push_back(static_cast<const char*>(b));
  return Status::ok();
}

// A non-blocking list form whose arguments could not be read.
fwResult_t listNotStarted(const Status& st, const CollectiveArgs& args, fwRequest_t* request) {
  if (request != nullptr) *request = nullptr;
  return reportToCaller(st.withContext(collectiveName(args.kind)));
}

Status prepare(fwComm_t comm, const CollectiveArgs& args, Communicator** impl) {
  FW_RETURN_IF_ERROR(lookupComm(comm, impl));
  return validateCollective(args, (*impl)->rank(), (*impl)->size());
}

// Compression runs where the buffers are, so the residual must be there too.
Status checkCompressedMemory(Communicator* impl, const CollectiveArgs& args, MemoryType memory) {
  if (!args.compression.active() || args.compression.residual == nullptr) return Status::ok();
  if (impl->memoryTypeOf(args.compression.residual) != memory) {
    return Status(fwInvalidUsage, memory == MemoryType::Cuda
                                      ? "the residual is host memory but the buffers are device memory"
                                      : "the residual is device memory but the buffers are host memory");
  }
  return Status::ok();
}

Status runBlocking(fwComm_t comm, fwStream_t stream, const CollectiveArgs& args) {
  Communicator* impl = nullptr;
  FW_RETURN_IF_ERROR(prepare(comm, args, &impl));
  MemoryType memory = MemoryType::Host;
  FW_RETURN_IF_ERROR(impl->memoryTypeOf(args, &memory));
  FW_RETURN_IF_ERROR(checkCompressedMemory(impl, args, memory));
  // A call with no bytes on this rank but a stream follows the device path
  // too, so that it stays in step with ranks whose buffers are on the GPU.
  auto noBytes = [&] {
    size_t sendBytes = 0, recvBytes = 0;
    bufferBytes(args, impl->rank(), impl->size(), &sendBytes, &recvBytes);
    return sendBytes == 0 && recvBytes == 0;
  };
  if (memory == MemoryType::Cuda || (stream != nullptr && impl->hasDevicePath() && !args.listForm() && noBytes())) {
    return impl->deviceCollective(args, stream);
  }
  FW_RETURN_IF_ERROR(validateHostStream(stream));
  CollectiveArgs host = args;
  impl->applyCompressionRules(&host);
  return impl->collective(host);
}

fwResult_t blocking(fwComm_t comm, fwStream_t stream, const CollectiveArgs& args) {
  const Status st = runBlocking(comm, stream, args);
  return reportToCaller(st.isOk() ? st : st.withContext(collectiveName(args.kind)));  // named on failure only
}

// The compressed forms: the plain call's arguments plus the descriptor.
fwResult_t blockingCompressed(fwComm_t comm, fwStream_t stream, CollectiveArgs args, const fwCompression_t* c) {
  const Status read = readCompression(c, &args.compression);
  if (!read.isOk()) return reportToCaller(read.withContext(collectiveName(args.kind)));
  return blocking(comm, stream, args);
}

// Device buffers are ordered by a stream, which the non-blocking calls do not take.
Status rejectDeviceBuffers(Communicator* impl, const CollectiveArgs& args) {
  MemoryType memory = MemoryType::Host;
  FW_RETURN_IF_ERROR(impl->memoryTypeOf(args, &memory));
  if (memory == MemoryType::Cuda) {
    return Status(fwInvalidUsage, "non-blocking calls take host buffers; device buffers go to the blocking call "
                                  "with a stream");
  }
  return Status::ok();
}

// compressed: the compressed forms, with their descriptor (which may not be NULL).
fwResult_t nonBlocking(fwComm_t comm, fwRequest_t* request, CollectiveArgs args,
                       const fwCompression_t* compression = nullptr, bool compressed = false) {
  if (request == nullptr) return reportToCaller(Status(fwInvalidPointer, "request is NULL"));
  *request = nullptr;
  Communicator* impl = nullptr;
  Status st = compressed ? readCompression(compression, &args.compression) : Status::ok();
  if (st.isOk()) st = prepare(comm, args, &impl);
  if (st.isOk()) st = rejectDeviceBuffers(impl, args);
  if (st.isOk()) st = checkCompressedMemory(impl, args, MemoryType::Host);
  if (st.isOk()) impl->applyCompressionRules(&args);
  std::shared_ptr<AsyncOperation> operation;
  if (st.isOk()) st = impl->startCollective(args, &operation);
  if (st.isOk()) {
    auto state = std::make_shared<RequestState>();
    state->comm = comm;
    state->what = collectiveName(args.kind);
    state->operation = std::move(operation);
    *request = registerRequest(std::move(state));
  }
  return reportToCaller(st.withContext(collectiveName(args.kind)));
}

}  // namespace

extern "C" {

fwResult_t fwAllReduce(const void* sendbuff, void* recvbuff, size_t count, fwDataType_t datatype, fwRedOp_t op,
                       fwComm_t comm, fwStream_t stream) {
  return blocking(comm, stream, makeArgs(CollectiveKind::AllReduce, sendbuff, recvbuff, count, datatype, op));
}
fwResult_t fwReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, fwDataType_t datatype,
                           fwRedOp_t op, fwComm_t comm, fwStream_t stream) {
  return blocking(comm, stream, makeArgs(CollectiveKind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op));
}
fwResult_t fwAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, fwDataType_t datatype, fwComm_t comm,
                       fwStream_t stream) {
  return blocking(comm, stream, makeArgs(CollectiveKind::AllGather, sendbuff, recvbuff, sendcount, datatype));
}
fwResult_t fwBroadcast(const void* sendbuff, void* recvbuff, size_t count, fwDataType_t datatype, int root,
                       fwComm_t comm, fwStream_t stream) {
  return blocking(comm, stream, makeArgs(CollectiveKind::Broadcast, sendbuff, recvbuff, count, datatype, fwSum, root));
}
fwResult_t fwReduce(const void* sendbuff, void* recvbuff, size_t count, fwDataType_t datatype, fwRedOp_t op, int root,
                    fwComm_t comm, fwStream_t stream) {
  return blocking(comm, stream, makeArgs(CollectiveKind::Reduce, sendbuff, recvbuff, count, datatype, op, root));
}
fwResult_t fwAllToAll(const void* sendbuff, void* recvbuff, size_t count, fwDataType_t datatype, fwComm_t comm,
                      fwStream_t stream) {
  return blocking(comm, stream, makeArgs(CollectiveKind::AllToAll, sendbuff, recvbuff, count, datatype));
}
fwResult_t fwAllToAllv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls, void* recvbuff,
                       const size_t* recvcounts, const size_t* rdispls, fwDataType_t datatype, fwComm_t comm,
                       fwStream_t stream) {
  return blocking(comm, stream, makeAllToAllv(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype));
}
fwResult_t fwGather(const void* sendbuff, void* recvbuff, size_t sendcount, fwDataType_t datatype, int root,
                    fwComm_t comm, fwStream_t stream) {
  return blocking(comm, stream, makeArgs(CollectiveKind::Gather, sendbuff, recvbuff, sendcount, datatype, fwSum, root));
}
fwResult_t fwScatter(const void* sendbuff, void* recvbuff, size_t recvcount, fwDataType_t datatype, int root,
                     fwComm_t comm, fwStream_t stream) {
  return blocking(comm, stream, makeArgs(CollectiveKind::Scatter, sendbuff, recvbuff, recvcount, datatype, fwSum, root));
}
fwResult_t fwBarrier(fwComm_t comm, fwStream_t stream) {
  return blocking(comm, stream, makeArgs(CollectiveKind::Barrier, nullptr, nullptr, 0, fwUint8));
}

fwResult_t fwIallReduce(const void* sendbuff, void* recvbuff, size_t count, fwDataType_t datatype, fwRedOp_t op,
                        fwComm_t comm, fwRequest_t* request) {
  return nonBlocking(comm, request, makeArgs(CollectiveKind::AllReduce, sendbuff, recvbuff, count, datatype, op));
}
fwResult_t fwIreduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, fwDataType_t datatype,
                            fwRedOp_t op, fwComm_t comm, fwRequest_t* request) {
  return nonBlocking(comm, request,
                     makeArgs(CollectiveKind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op));
}
fwResult_t fwIallGather(const void* sendbuff, void* recvbuff, size_t sendcount, fwDataType_t datatype, fwComm_t comm,
                        fwRequest_t* request) {
  return nonBlocking(comm, request, makeArgs(CollectiveKind::AllGather, sendbuff, recvbuff, sendcount, datatype));
}
fwResult_t fwIbroadcast(const void* sendbuff, void* recvbuff, size_t count, fwDataType_t datatype, int root,
                        fwComm_t comm, fwRequest_t* request) {
  return nonBlocking(comm, request,
                     makeArgs(CollectiveKind::Broadcast, sendbuff, recvbuff, count, datatype, fwSum, root));
}
fwResult_t fwIreduce(const void* sendbuff, void* recvbuff, size_t count, fwDataType_t datatype, fwRedOp_t op,
                     int root, fwComm_t comm, fwRequest_t* request) {
  return nonBlocking(comm, request, makeArgs(CollectiveKind::Reduce, sendbuff, recvbuff, count, datatype, op, root));
}
fwResult_t fwIallToAll(const void* sendbuff, void* recvbuff, size_t count, fwDataType_t datatype, fwComm_t comm,
                       fwRequest_t* request) {
  return nonBlocking(comm, request, makeArgs(CollectiveKind::AllToAll, sendbuff, recvbuff, count, datatype));
}
fwResult_t fwIallToAllv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls, void* recvbuff,
                        const size_t* recvcounts, const size_t* rdispls, fwDataType_t datatype, fwComm_t comm,
                        fwRequest_t* request) {
  return nonBlocking(comm, request,
                     makeAllToAllv(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype));
}
fwResult_t fwIgather(const void* sendbuff, void* recvbuff, size_t sendcount, fwDataType_t datatype, int root,
                     fwComm_t comm, fwRequest_t* request) {
  return nonBlocking(comm, request,
                     makeArgs(CollectiveKind::Gather, sendbuff, recvbuff, sendcount, datatype, fwSum, root));
}
fwResult_t fwIscatter(const void* sendbuff, void* recvbuff, size_t recvcount, fwDataType_t datatype, int root,
                      fwComm_t comm, fwRequest_t* request) {
  return nonBlocking(comm, request,
                     makeArgs(CollectiveKind::Scatter, sendbuff, recvbuff, recvcount, datatype, fwSum, root));
}
fwResult_t fwIbarrier(fwComm_t comm, fwRequest_t* request) {
  return nonBlocking(comm, request, makeArgs(CollectiveKind::Barrier, nullptr, nullptr, 0, fwUint8));
}

fwResult_t fwAllReduceCompressed(const void* sendbuff, void* recvbuff, size_t count, fwDataType_t datatype,
                                 fwRedOp_t op, const fwCompression_t* compression, fwComm_t comm, fwStream_t stream) {
  return blockingCompressed(comm, stream, makeArgs(CollectiveKind::AllReduce, sendbuff, recvbuff, count, datatype, op),
                            compression);
}
fwResult_t fwReduceScatterCompressed(const void* sendbuff, void* recvbuff, size_t recvcount, fwDataType_t datatype,
                                     fwRedOp_t op, const fwCompression_t* compression, fwComm_t comm,
                                     fwStream_t stream) {
  return blockingCompressed(
      comm, stream, makeArgs(CollectiveKind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op), compression);
}
fwResult_t fwAllGatherCompressed(const void* sendbuff, void* recvbuff, size_t sendcount, fwDataType_t datatype,
                                 const fwCompression_t* compression, fwComm_t comm, fwStream_t stream) {
  return blockingCompressed(comm, stream, makeArgs(CollectiveKind::AllGather, sendbuff, recvbuff, sendcount, datatype),
                            compression);
}
fwResult_t fwIallReduceCompressed(const void* sendbuff, void* recvbuff, size_t count, fwDataType_t datatype,
                                  fwRedOp_t op, const fwCompression_t* compression, fwComm_t comm,
                                  fwRequest_t* request) {
  return nonBlocking(comm, request, makeArgs(CollectiveKind::AllReduce, sendbuff, recvbuff, count, datatype, op),
                     compression, true);
}
fwResult_t fwIreduceScatterCompressed(const void* sendbuff, void* recvbuff, size_t recvcount, fwDataType_t datatype,
                                      fwRedOp_t op, const fwCompression_t* compression, fwComm_t comm,
                                      fwRequest_t* request) {
  return nonBlocking(comm, request,
                     makeArgs(CollectiveKind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op),
                     compression, true);
}
fwResult_t fwIallGatherCompressed(const void* sendbuff, void* recvbuff, size_t sendcount, fwDataType_t datatype,
                                  const fwCompression_t* compression, fwComm_t comm, fwRequest_t* request) {
  return nonBlocking(comm, request, makeArgs(CollectiveKind::AllGather, sendbuff, recvbuff, sendcount, datatype),
                     compression, true);
}

fwResult_t fwAllGatherList(const void* sendbuff, void* const* recvbuffs, size_t sendcount, fwDataType_t datatype,
                           fwComm_t comm, fwStream_t stream) {
  CollectiveArgs args;
  const Status read = readAllGatherList(comm, sendbuff, recvbuffs, sendcount, datatype, &args);
  if (!read.isOk()) return reportToCaller(read.withContext(collectiveName(args.kind)));
  return blocking(comm, stream, args);
}
fwResult_t fwReduceScatterList(const void* const* sendbuffs, void* recvbuff, size_t recvcount, fwDataType_t datatype,
                               fwRedOp_t op, fwComm_t comm, fwStream_t stream) {
  CollectiveArgs args;
  const Status read = readReduceScatterList(comm, sendbuffs, recvbuff, recvcount, datatype, op, &args);
  if (!read.isOk()) return reportToCaller(read.withContext(collectiveName(args.kind)));
  return blocking(comm, stream, args);
}
fwResult_t fwIallGatherList(const void* sendbuff, void* const* recvbuffs, size_t sendcount, fwDataType_t datatype,
                            fwComm_t comm, fwRequest_t* request) {
  CollectiveArgs args;
  const Status read = readAllGatherList(comm, sendbuff, recvbuffs, sendcount, datatype, &args);
  if (!read.isOk()) return listNotStarted(read, args, request);
  return nonBlocking(comm, request, std::move(args));
}
fwResult_t fwIreduceScatterList(const void* const* sendbuffs, void* recvbuff, size_t recvcount,
                                fwDataType_t datatype, fwRedOp_t op, fwComm_t comm, fwRequest_t* request) {
  CollectiveArgs args;
  const Status read = readReduceScatterList(comm, sendbuffs, recvbuff, recvcount, datatype, op, &args);
  if (!read.isOk()) return listNotStarted(read, args, request);
  return nonBlocking(comm, request, std::move(args));
}

}  // extern "C"

fwResult_t fairway::postCollective(const fwOpArgs_t& a, fwComm_t comm, fwStream_t stream, fwRequest_t* request) {
  const OperationRow& operation = operationRow(a.type);
  // What each entry point above builds for the same call.
  CollectiveArgs args;
  switch (operation.kind) {
    case CollectiveKind::Barrier: args = makeArgs(CollectiveKind::Barrier, nullptr, nullptr, 0, fwUint8); break;
    case CollectiveKind::AllToAllv:
      args = makeAllToAllv(a.sendbuff, a.sendcounts, a.sdispls, a.recvbuff, a.recvcounts, a.rdispls, a.datatype);
      break;
    default:
      args = makeArgs(operation.kind, a.sendbuff, a.recvbuff, a.count, a.datatype, operation.reduces ? a.op : fwSum,
                      operation.rooted ? a.root : 0);
  }
  // The list forms' arrays, read as their entry points read them.
  Status read;
  if (a.recvbuffs != nullptr) read = readAllGatherList(comm, a.sendbuff, a.recvbuffs, a.count, a.datatype, &args);
  if (a.sendbuffs != nullptr) {
    read = readReduceScatterList(comm, a.sendbuffs, a.recvbuff, a.count, a.datatype, a.op, &args);
  }
  if (!read.isOk()) {
    return request != nullptr ? listNotStarted(read, args, request)
                              : reportToCaller(read.withContext(collectiveName(args.kind)));
  }
  const bool compressed = a.compression != nullptr;
  if (request != nullptr) return nonBlocking(comm, request, std::move(args), a.compression, compressed);
  return compressed ? blockingCompressed(comm, stream, std::move(args), a.compression) : blocking(comm, stream, args);
}
