#include "collective/collective_args.h"

#include <algorithm>

#include "core/datatype.h"

namespace fairway {

uint8_t collectiveSignature(const CollectiveArgs& a) {
  const OperationRow& operation = operationRow(a.kind);
  const bool reduces = operation.reduces;
  const bool rooted = operation.rooted;
  // Every field but the count in one word (each fits its bits), the count
  // in another; each is spread by its own odd multiplier (independent
  // products: this runs on every call), and the signature folds both.
  uint64_t fields = static_cast<uint64_t>(a.kind) | static_cast<uint64_t>(a.datatype) << 8 |
                    static_cast<uint64_t>(reduces ? a.op : 0) << 16 |
                    static_cast<uint64_t>(static_cast<uint32_t>(rooted ? a.root : 0)) << 24;
  // Ranks that compress differently (or one not at all) do not match.
  if (a.compression.active()) {
    fields ^= (static_cast<uint64_t>(a.compression.kind) + 1) << 56 ^
              static_cast<uint64_t>(a.compression.blockwise() ? a.compression.blockSize : 0) << 44;
  }
  const uint64_t count = a.kind == CollectiveKind::AllToAllv ? 0 : a.count;
  const uint64_t h = fields * 0x9e3779b97f4a7c15ull ^ count * 0xc2b2ae3d27d4eb4full;
  return static_cast<uint8_t>(h >> 56 ^ h >> 40 ^ h >> 24 ^ h >> 8);
}

void bufferBytes(const CollectiveArgs& a, int rank, int n, size_t* sendBytes, size_t* recvBytes) {
  const size_t es = a.kind == CollectiveKind::Barrier ? 0 : datatypeSize(a.datatype);
  const size_t one = a.count * es, all = one * static_cast<size_t>(n);
  const bool root = rank == a.root;
  *sendBytes = *recvBytes = 0;
  switch (a.kind) {
    case CollectiveKind::AllReduce: *sendBytes = *recvBytes = one; break;
    case CollectiveKind::ReduceScatter: *sendBytes = all; *recvBytes = one; break;
    case CollectiveKind::AllGather: *sendBytes = one; *recvBytes = all; break;
    case CollectiveKind::Broadcast: *sendBytes = root ? one : 0; *recvBytes = one; break;
    case CollectiveKind::Reduce: *sendBytes = one; *recvBytes = root ? one : 0; break;
    case CollectiveKind::AllToAll: *sendBytes = *recvBytes = all; break;
    case CollectiveKind::AllToAllv:
      for (int i = 0; i < n; ++i) {
        *sendBytes = std::max(*sendBytes, (a.sdispls[i] + a.sendcounts[i]) * es);
        *recvBytes = std::max(*recvBytes, (a.rdispls[i] + a.recvcounts[i]) * es);
      }
      break;
    case CollectiveKind::Gather: *sendBytes = one; *recvBytes = root ? all : 0; break;
    case CollectiveKind::Scatter: *sendBytes = root ? all : 0; *recvBytes = one; break;
    case CollectiveKind::Barrier: break;
  }
}

}  // namespace fairway
