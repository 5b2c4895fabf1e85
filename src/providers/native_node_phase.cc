#include "providers/native_node_phase.h"

#include "algorithms/context.h"

namespace fairway {
namespace {

const char* at(const void* base, size_t elements, size_t es) { return static_cast<const char*>(base) + elements * es; }
char* at(void* base, size_t elements, size_t es) { return static_cast<char*>(base) + elements * es; }

bool contiguousAndEqual(const ChunkLayout& blocks) { return blocks.count % static_cast<size_t>(blocks.n) == 0; }

}  // namespace

NativeNodePhase::NativeNodePhase(DeviceRuntime& device, int64_t timeoutMs, std::unique_ptr<NativeCollectives> native)
    : device_(device),
      stream_(device, timeoutMs),
      native_(std::move(native)),
      packed_(device, StagingBuffer::Kind::Device),
      result_(device, StagingBuffer::Kind::Device) {}

// The rail phase reads what NCCL wrote, so each call completes first.
Status NativeNodePhase::finish(Status enqueued) {
  FW_RETURN_IF_ERROR(enqueued);
  FW_RETURN_IF_ERROR(stream_.wait().withContext("the node's NCCL collective"));
  return native_->asyncError();
}

Status NativeNodePhase::reduceScatter(CollectiveContext& node, const void* send, void* out, const ChunkLayout& blocks,
                                      void* /*partial*/) {
  if (blocks.stride != 0) return Status(fwInternalError, "NCCL's node phase reads no strided blocks");
  if (blocks.count == 0) return Status::ok();
  void* stream = nullptr;
  FW_RETURN_IF_ERROR(stream_.get(&stream));
  const Reducer& reducer = node.reducer();
  // The phase never finalises: avg is summed here and divided once, later.
  const fwRedOp_t op = reducer.op() == fwAvg ? fwSum : reducer.op();
  const fwDataType_t type = reducer.datatype();
  const size_t es = node.elementSize();
  const int r = node.rank();
  if (contiguousAndEqual(blocks)) {
    return finish(native_->reduceScatter(send, out, blocks.count / blocks.n, type, op, stream));
  }
  const size_t padded = blocks.chunkCount(0);
  FW_RETURN_IF_ERROR(packed_.reserve(blocks.n * padded * es));
  FW_RETURN_IF_ERROR(result_.reserve(padded * es));
  for (int b = 0; b < blocks.n; ++b) {
    FW_RETURN_IF_ERROR(device_.copyAsync(at(packed_.data(), b * padded, es), at(send, blocks.chunkOffset(b), es),
                                         blocks.chunkCount(b) * es, stream));
  }
  FW_RETURN_IF_ERROR(native_->reduceScatter(packed_.data(), result_.data(), padded, type, op, stream));
  return finish(device_.copyAsync(out, result_.data(), blocks.chunkCount(r) * es, stream));
}

Status NativeNodePhase::allgather(CollectiveContext& node, void* buf, const ChunkLayout& blocks) {
  if (blocks.stride != 0) return Status(fwInternalError, "NCCL's node phase reads no strided blocks");
  if (blocks.count == 0) return Status::ok();
  void* stream = nullptr;
  FW_RETURN_IF_ERROR(stream_.get(&stream));
  // Moved as bytes: an allgather has no reducer to name the type.
  const size_t es = node.elementSize();
  const int r = node.rank();
  if (contiguousAndEqual(blocks)) {
    const size_t each = blocks.count / blocks.n;
    return finish(native_->allGather(at(buf, r * each, es), buf, each * es, fwUint8, stream));
  }
  const size_t padded = blocks.chunkCount(0);
  FW_RETURN_IF_ERROR(packed_.reserve(blocks.n * padded * es));
  char* mine = at(packed_.data(), r * padded, es);
  FW_RETURN_IF_ERROR(device_.copyAsync(mine, at(buf, blocks.chunkOffset(r), es), blocks.chunkCount(r) * es, stream));
  FW_RETURN_IF_ERROR(native_->allGather(mine, packed_.data(), padded * es, fwUint8, stream));
  for (int b = 0; b < blocks.n; ++b) {
    if (b == r) continue;
    FW_RETURN_IF_ERROR(device_.copyAsync(at(buf, blocks.chunkOffset(b), es), at(packed_.data(), b * padded, es),
                                         blocks.chunkCount(b) * es, stream));
  }
  return finish(Status::ok());
}

}  // namespace fairway
