// Ring allgather, pipelined in segments.
//
// At step t (0 .. n-2) rank r sends chunk r-t to its right neighbour and
// receives chunk r-t-1 from its left, straight into place. A received
// segment is forwarded at once, so steps overlap. Receives run a bounded
// window ahead.
#include "algorithms/algorithms.h"

namespace fairway {
Status ringAllgather(CollectiveContext& ctx, void* buf, const ChunkLayout& layout) {
  const int n = ctx.size();
  const int r = ctx.rank();
  if (n == 1) return Status::ok();
  const int left = positiveMod(r - 1, n);
  const int right = (r + 1) % n;
  const Segments seg = ctx.segments();
  const int window = ctx.pipelineDepth();

  const size_t ownCount = layout.chunkCount(r);
  const size_t ownSegments = seg.countFor(ownCount);
  const size_t units = RingCursor(layout, seg, r, 1).totalUnits();
  // Sends are waited on only at the end: the right neighbour takes a
  // forward a whole chunk after it leaves, so waiting earlier stalls the ring.
  Pending* recvs = ctx.pendings(window + ownSegments + units);
  Pending* sends = recvs + window;

  for (size_t j = 0; j < ownSegments; ++j) {
    FW_RETURN_IF_ERROR(ctx.send(right, ctx.at(buf, layout.chunkOffset(r) + seg.offset(j)),
                                seg.length(ownCount, j), static_cast<uint32_t>(j), &sends[j]));
  }

  RingCursor posted(layout, seg, r, 1);
  RingCursor done = posted;
  auto postNext = [&]() -> Status {
    FW_RETURN_IF_ERROR(
        ctx.recv(left, ctx.at(buf, posted.offset()), posted.length(), static_cast<uint32_t>(posted.unit()), &recvs[posted.unit() % window]));
    posted.advance();
    return Status::ok();
  };
  for (int i = 0; i < window && !posted.atEnd(); ++i) FW_RETURN_IF_ERROR(postNext());

  while (!done.atEnd()) {
    FW_RETURN_IF_ERROR(ctx.wait(&recvs[done.unit() % window]));
    if (done.step() < n - 2) {
      FW_RETURN_IF_ERROR(ctx.send(right, ctx.at(buf, done.offset()), done.length(),
                                  static_cast<uint32_t>(ownSegments + done.unit()), &sends[ownSegments + done.unit()]));
    }
    done.advance();
    if (!posted.atEnd()) FW_RETURN_IF_ERROR(postNext());
  }
  return ctx.waitAll(sends, ownSegments + units);
}

}  // namespace fairway
