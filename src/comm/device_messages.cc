// Messages on device buffers (fwSend and fwRecv): NCCL's where the plan
// gives messages to NCCL, else UCX from and into the device memory itself,
// or, where UCX cannot reach it, in slices through pinned host memory,
// moved by the communicator's worker on a private copy stream.
#include <algorithm>

#include "comm/device_collectives.h"
#include "core/datatype.h"

namespace fairway {

Status DeviceCollectives::ensureStagingResources() {
  if (copyStream_ != nullptr) return Status::ok();
  return copier_.get(&copyStream_);
}

// UCX sends from or receives into the device buffer itself.
Status DeviceCollectives::directSend(const void* buf, size_t bytes, int peer, uint64_t number) {
  Pending pending;
  FW_RETURN_IF_ERROR(
      comm_.pointToPoint().postSendNumbered(buf, bytes, peer, PointToPoint::kDefaultTag, number, &pending,
                                            deviceMemoryType()));
  return comm_.messenger().wait(&pending);
}

Status DeviceCollectives::directRecv(void* buf, size_t bytes, int peer, uint64_t number) {
  Pending pending;
  FW_RETURN_IF_ERROR(
      comm_.pointToPoint().postRecvNumbered(buf, bytes, peer, PointToPoint::kDefaultTag, number, &pending,
                                            deviceMemoryType()));
  return comm_.messenger().wait(&pending);
}

Status DeviceCollectives::send(const void* buf, size_t count, fwDataType_t datatype, int peer, void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (comm_.selector().ncclMessages()) {
    FW_RETURN_IF_ERROR(ensureNative());
    return native_->send(buf, count, datatype, peer, stream);
  }
  const size_t bytes = count * datatypeSize(datatype);
  // In call order, like the collectives' numbers; device messages carry no tag.
  const uint64_t number = comm_.pointToPoint().reserveSendNumber(peer, PointToPoint::kDefaultTag);
  const bool fromDevice = ucxDirect();
  auto body = [this, buf, bytes, peer, number, fromDevice](uint32_t) {
    return fromDevice ? directSend(buf, bytes, peer, number) : stagedSend(buf, bytes, peer, number);
  };
  if (fromDevice || stagingReadyFor(bytes)) return enqueueOnWorker(stream, 0, std::move(body));
  return runBeforeReturning(stream, 0, std::move(body));
}

Status DeviceCollectives::recv(void* buf, size_t count, fwDataType_t datatype, int peer, void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (comm_.selector().ncclMessages()) {
    FW_RETURN_IF_ERROR(ensureNative());
    return native_->recv(buf, count, datatype, peer, stream);
  }
  const size_t bytes = count * datatypeSize(datatype);
  const uint64_t number = comm_.pointToPoint().reserveRecvNumber(peer, PointToPoint::kDefaultTag);
  const bool intoDevice = ucxDirect();
  auto body = [this, buf, bytes, peer, number, intoDevice](uint32_t) {
    return intoDevice ? directRecv(buf, bytes, peer, number) : stagedRecv(buf, bytes, peer, number);
  };
  if (intoDevice || stagingReadyFor(bytes)) return enqueueOnWorker(stream, 0, std::move(body));
  return runBeforeReturning(stream, 0, std::move(body));
}

// A staged message moves in slices of FAIRWAY_STAGING_SLICE_BYTES through
// the two pinned slice buffers, each slice one UCX message under the
// call's message number (a sender's messages match in order), so its
// staging memory is bounded whatever the message's size: the next slice
// is copied while the last one crosses the network. Sender and receiver
// cut alike (a count that differs is a mismatch UCX reports); an empty
// message is one empty slice.
// Read by callers' threads under mutex_: the slices grow only in a call
// that runBeforeReturning runs, while its caller holds mutex_ and waits.
bool DeviceCollectives::stagingReadyFor(size_t bytes) const {
  const size_t wanted = std::min(bytes, stagingSliceBytes_);
  return copyStream_ != nullptr && slices_[0].capacity() >= wanted && slices_[1].capacity() >= wanted;
}

size_t DeviceCollectives::messageSlices(size_t bytes) const {
  const size_t slice = stagingSliceBytes_;
  return std::max<size_t>(1, (bytes + slice - 1) / slice);
}

Status DeviceCollectives::stagedSend(const void* buf, size_t bytes, int peer, uint64_t number) {
  const size_t slice = stagingSliceBytes_, slices = messageSlices(bytes);
  FW_RETURN_IF_ERROR(ensureStagingResources());
  for (StagingBuffer& b : slices_) FW_RETURN_IF_ERROR(b.reserve(std::min(bytes, slice)));
  Pending pending[2];
  for (size_t s = 0; s < slices; ++s) {
    StagingBuffer& b = slices_[s % 2];
    FW_RETURN_IF_ERROR(comm_.messenger().wait(&pending[s % 2]));  // the buffer's last slice has left
    const size_t len = std::min(slice, bytes - s * slice);
    FW_RETURN_IF_ERROR(device_.copyAsync(b.data(), static_cast<const char*>(buf) + s * slice, len, copyStream_));
    FW_RETURN_IF_ERROR(copier_.wait());
    FW_RETURN_IF_ERROR(comm_.pointToPoint().postSendNumbered(b.data(), len, peer, PointToPoint::kDefaultTag, number,
                                                             &pending[s % 2]));
  }
  return comm_.messenger().waitAll(pending, 2);
}

Status DeviceCollectives::stagedRecv(void* buf, size_t bytes, int peer, uint64_t number) {
  const size_t slice = stagingSliceBytes_, slices = messageSlices(bytes);
  FW_RETURN_IF_ERROR(ensureStagingResources());
  for (StagingBuffer& b : slices_) FW_RETURN_IF_ERROR(b.reserve(std::min(bytes, slice)));
  Pending pending[2];
  auto post = [&](size_t s) {
    return comm_.pointToPoint().postRecvNumbered(slices_[s % 2].data(), std::min(slice, bytes - s * slice), peer,
                                                 PointToPoint::kDefaultTag, number, &pending[s % 2]);
  };
  for (size_t s = 0; s < std::min<size_t>(2, slices); ++s) FW_RETURN_IF_ERROR(post(s));
  for (size_t s = 0; s < slices; ++s) {
    FW_RETURN_IF_ERROR(comm_.messenger().wait(&pending[s % 2]));
    FW_RETURN_IF_ERROR(device_.copyAsync(static_cast<char*>(buf) + s * slice, slices_[s % 2].data(),
                                         std::min(slice, bytes - s * slice), copyStream_));
    if (s + 2 < slices) {
      FW_RETURN_IF_ERROR(copier_.wait());  // emptied before it is refilled
      FW_RETURN_IF_ERROR(post(s + 2));
    }
  }
  return copier_.wait();
}

}  // namespace fairway
