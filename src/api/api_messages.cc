// C entry points for point-to-point messages: fwSend and fwRecv, and their
// tagged, non-blocking and any-source forms, all over one description of
// the message (the semantics are fairway.h's).
#include <memory>
#include <string>

#include "api/handles.h"
#include "api/validate.h"
#include "core/datatype.h"
#include "core/errors.h"

using namespace fairway;

namespace {

static_assert(FAIRWAY_MAX_TAG == PointToPoint::kMaxTag, "FAIRWAY_MAX_TAG is the range of the tag field");

struct Message {
  bool isSend = false;
  void* buf = nullptr;
  size_t count = 0;
  fwDataType_t datatype = fwFloat32;
  int peer = 0;  // FAIRWAY_ANY_SOURCE: a receive from any rank
  int tag = 0;
  int* source = nullptr;  // a receive's place for its sender, or null

  bool anySource() const { return !isSend && peer == FAIRWAY_ANY_SOURCE; }
  // What device messages support: tag 0 from a named peer.
  bool plain() const { return tag == 0 && !anySource(); }
  size_t bytes() const { return count * datatypeSize(datatype); }
};

Message send(const void* buf, size_t count, fwDataType_t datatype, int peer, int tag) {
  return Message{true, const_cast<void*>(buf), count, datatype, peer, tag, nullptr};
}

Message receive(void* buf, size_t count, fwDataType_t datatype, int peer, int tag, int* source) {
  return Message{false, buf, count, datatype, peer, tag, source};
}

Status validateMessage(const Communicator& impl, const Message& m) {
  if (m.tag < 0 || m.tag > FAIRWAY_MAX_TAG) {
    return Status(fwInvalidArgument,
                  "tag " + std::to_string(m.tag) + " is outside 0.." + std::to_string(FAIRWAY_MAX_TAG));
  }
  // A receive from any source has no peer to check, only its buffer.
  const int peer = m.anySource() ? impl.rank() : m.peer;
  return validatePointToPoint(m.buf, m.count, m.datatype, peer, impl.size(), m.isSend ? "sendbuff" : "recvbuff");
}

Status requirePlainOnDevice(const Message& m) {
  if (m.plain()) return Status::ok();
  return Status(fwInvalidUsage, m.anySource() ? "a receive from any source takes a host buffer"
                                              : "device messages take tag 0 (they match in call order)");
}

Status postMessage(Communicator* impl, const Message& m, Pending* out) {
  PointToPoint& messages = impl->pointToPoint();
  const uint32_t tag = static_cast<uint32_t>(m.tag);
  return m.isSend ? messages.postSend(m.buf, m.bytes(), m.peer, tag, out)
                  : messages.postRecv(m.buf, m.bytes(), m.peer, tag, out);
}

// The receive from any source that m describes, not yet matched.
std::unique_ptr<AnySourceReceive> anySourceReceive(const Message& m) {
  auto receive = std::make_unique<AnySourceReceive>();
  receive->buf = m.buf;
  receive->bytes = m.bytes();
  receive->tag = static_cast<uint32_t>(m.tag);
  return receive;
}

// A blocking message on host memory, validated.
Status runHostMessage(Communicator* impl, const Message& m) {
  if (m.anySource()) {
    auto receive = anySourceReceive(m);
    FW_RETURN_IF_ERROR(impl->pointToPoint().waitAnySource(receive.get()));
    if (m.source != nullptr) *m.source = receive->source;
    return Status::ok();
  }
  Pending pending;
  FW_RETURN_IF_ERROR(postMessage(impl, m, &pending));
  FW_RETURN_IF_ERROR(impl->messenger().wait(&pending));
  if (m.source != nullptr) *m.source = m.peer;
  return Status::ok();
}

Status runBlocking(fwComm_t comm, fwStream_t stream, const Message& m) {
  Communicator* impl = nullptr;
  FW_RETURN_IF_ERROR(lookupComm(comm, &impl));
  FW_RETURN_IF_ERROR(validateMessage(*impl, m));
  // An empty message with a stream takes the device path too, as an empty
  // collective does, so it stays in step with its peer's device messages.
  const bool device = m.count > 0 ? impl->memoryTypeOf(m.buf) == MemoryType::Cuda
                                  : stream != nullptr && impl->hasDevicePath() && m.plain();
  if (device) {
    FW_RETURN_IF_ERROR(requirePlainOnDevice(m));
    if (m.source != nullptr) *m.source = m.peer;
    const uint64_t trace = impl->traceMessage(m.isSend, m.peer, m.count, m.datatype, stream);
    const Status st = m.isSend ? impl->deviceSend(m.buf, m.count, m.datatype, m.peer, stream)
                               : impl->deviceRecv(m.buf, m.count, m.datatype, m.peer, stream);
    if (st.isOk()) {
      impl->traceEnqueued(trace);
    } else {
      impl->traceEnded(trace, st, m.bytes());
    }
    return st;
  }
  FW_RETURN_IF_ERROR(validateHostStream(stream));
  const uint64_t trace = impl->traceMessage(m.isSend, m.anySource() ? -1 : m.peer, m.count, m.datatype, nullptr);
  const Status st = runHostMessage(impl, m);
  impl->traceEnded(trace, st, m.bytes());
  return st;
}

fwResult_t blocking(fwComm_t comm, fwStream_t stream, const Message& m) {
  return reportToCaller(runBlocking(comm, stream, m).withContext(m.isSend ? "send" : "recv"));
}

Status start(fwComm_t comm, const Message& m, std::shared_ptr<RequestState> state) {
  Communicator* impl = nullptr;
  FW_RETURN_IF_ERROR(lookupComm(comm, &impl));
  FW_RETURN_IF_ERROR(validateMessage(*impl, m));
  if (m.count > 0 && impl->memoryTypeOf(m.buf) == MemoryType::Cuda) {
    return Status(fwInvalidUsage, "non-blocking calls take host buffers; device buffers go to the blocking call "
                                  "with a stream");
  }
  state->traceId = impl->traceMessage(m.isSend, m.anySource() ? -1 : m.peer, m.count, m.datatype, nullptr);
  state->bytes = m.bytes();
  Status st;
  if (!m.anySource()) {
    st = postMessage(impl, m, &state->message);
  } else {
    // Matched later, by fwTest or fwWait (one try now).
    state->anySource = anySourceReceive(m);
    st = impl->pointToPoint().matchAnySource(state->anySource.get());
  }
  if (!st.isOk()) impl->traceEnded(state->traceId, st, state->bytes);  // no request is made
  return st;
}

fwResult_t nonBlocking(fwComm_t comm, const Message& m, fwRequest_t* request) {
  const char* what = m.isSend ? "isend" : "irecv";
  if (request == nullptr) return reportToCaller(Status(fwInvalidPointer, "request is NULL").withContext(what));
  *request = nullptr;
  auto state = std::make_shared<RequestState>();
  state->comm = comm;
  state->what = what;
  state->source = m.source;
  const Status st = start(comm, m, state);
  if (st.isOk()) *request = registerRequest(std::move(state));
  return reportToCaller(st.withContext(what));
}

}  // namespace

extern "C" {

fwResult_t fwSend(const void* sendbuff, size_t count, fwDataType_t datatype, int peer, fwComm_t comm,
                  fwStream_t stream) {
  return blocking(comm, stream, send(sendbuff, count, datatype, peer, 0));
}
fwResult_t fwRecv(void* recvbuff, size_t count, fwDataType_t datatype, int peer, fwComm_t comm, fwStream_t stream) {
  return blocking(comm, stream, receive(recvbuff, count, datatype, peer, 0, nullptr));
}
fwResult_t fwSendTagged(const void* sendbuff, size_t count, fwDataType_t datatype, int peer, int tag, fwComm_t comm,
                        fwStream_t stream) {
  return blocking(comm, stream, send(sendbuff, count, datatype, peer, tag));
}
fwResult_t fwRecvTagged(void* recvbuff, size_t count, fwDataType_t datatype, int peer, int tag, int* source,
                        fwComm_t comm, fwStream_t stream) {
  return blocking(comm, stream, receive(recvbuff, count, datatype, peer, tag, source));
}

fwResult_t fwIsend(const void* sendbuff, size_t count, fwDataType_t datatype, int peer, fwComm_t comm,
                   fwRequest_t* request) {
  return nonBlocking(comm, send(sendbuff, count, datatype, peer, 0), request);
}
fwResult_t fwIrecv(void* recvbuff, size_t count, fwDataType_t datatype, int peer, fwComm_t comm,
                   fwRequest_t* request) {
  return nonBlocking(comm, receive(recvbuff, count, datatype, peer, 0, nullptr), request);
}
fwResult_t fwIsendTagged(const void* sendbuff, size_t count, fwDataType_t datatype, int peer, int tag, fwComm_t comm,
                         fwRequest_t* request) {
  return nonBlocking(comm, send(sendbuff, count, datatype, peer, tag), request);
}
fwResult_t fwIrecvTagged(void* recvbuff, size_t count, fwDataType_t datatype, int peer, int tag, int* source,
                         fwComm_t comm, fwRequest_t* request) {
  return nonBlocking(comm, receive(recvbuff, count, datatype, peer, tag, source), request);
}

}  // extern "C"
