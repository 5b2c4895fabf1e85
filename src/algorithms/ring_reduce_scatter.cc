// Ring reduce-scatter, pipelined in segments.
//
// At step t (0 .. n-2) rank r sends chunk r-t-1 to its right neighbour and
// receives chunk r-t-2 from its left, adding its own contribution; the
// chunk received at the last step is chunk r, complete. Every chunk is cut
// into segments, and a segment is forwarded as soon as it is reduced, so a
// step never waits for the whole previous one.
//
// Received segments land in a window of scratch slots and are combined at
// once, so a slot is free again as soon as it is read. Partial sums are
// kept in `partial` (laid out like send) until their forward has left: the
// right neighbour reads them a whole chunk later, so they cannot share the
// slots without stalling the ring. Sends are only waited on at the end.
#include <cstring>

#include "algorithms/algorithms.h"
#include "core/bytes.h"

namespace fairway {

Status ringReduceScatter(CollectiveContext& ctx, const void* send, void* out, const ChunkLayout& layout,
                         void* partial) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const Reducer& reducer = ctx.reducer();
  const size_t mine = layout.chunkCount(r);
  if (n == 1) {
    FW_RETURN_IF_ERROR(ctx.copy(out, send, mine));
    FW_RETURN_IF_ERROR(ctx.finalize(reducer, out, mine));
    return Status::ok();
  }
  const int left = positiveMod(r - 1, n);
  const int right = (r + 1) % n;
  const Segments seg = ctx.segments();
  const int window = ctx.pipelineDepth();

  // Step 0 sends this rank's own contribution to chunk r-1 straight from send.
  const int firstChunk = positiveMod(r - 1, n);
  const size_t firstCount = layout.chunkCount(firstChunk);
  const size_t firstSegments = seg.countFor(firstCount);
  const size_t units = RingCursor(layout, seg, r, 2).totalUnits();

  char* slotBuffer = ctx.scratchBytes(window * seg.segmentElems * ctx.elementSize());
  Pending* recvs = ctx.pendings(window + firstSegments + units);
  Pending* sends = recvs + window;
  auto slotAt = [&](size_t unit) { return slotBuffer + (unit % window) * seg.segmentElems * ctx.elementSize(); };

  for (size_t j = 0; j < firstSegments; ++j) {
    FW_RETURN_IF_ERROR(ctx.send(right, ctx.at(send, layout.chunkOffset(firstChunk) + seg.offset(j)),
                                seg.length(firstCount, j), static_cast<uint32_t>(j), &sends[j]));
  }

  RingCursor posted(layout, seg, r, 2);
  RingCursor done = posted;
  auto postNext = [&]() -> Status {
    FW_RETURN_IF_ERROR(ctx.recv(left, slotAt(posted.unit()), posted.length(), static_cast<uint32_t>(posted.unit()),
                                &recvs[posted.unit() % window]));
    posted.advance();
    return Status::ok();
  };
  for (int i = 0; i < window && !posted.atEnd(); ++i) FW_RETURN_IF_ERROR(postNext());

  while (!done.atEnd()) {
    FW_RETURN_IF_ERROR(ctx.wait(&recvs[done.unit() % window]));
    const size_t len = done.length();
    const char* own = ctx.at(send, done.offset());
    const char* received = slotAt(done.unit());
    if (done.step() == n - 2) {  // chunk r: the last contribution
      char* dst = ctx.at(out, seg.offset(done.segment()));
      FW_RETURN_IF_ERROR(ctx.combine(reducer, dst, own, received, len));
      FW_RETURN_IF_ERROR(ctx.finalize(reducer, dst, len));
    } else {
      char* sum = ctx.at(partial, done.offset());
      FW_RETURN_IF_ERROR(ctx.combine(reducer, sum, own, received, len));
      FW_RETURN_IF_ERROR(ctx.send(right, sum, len, static_cast<uint32_t>(firstSegments + done.unit()),
                                  &sends[firstSegments + done.unit()]));
    }
    done.advance();
    if (!posted.atEnd()) FW_RETURN_IF_ERROR(postNext());
  }
  return ctx.waitAll(sends, firstSegments + units);
}

}  // namespace fairway
