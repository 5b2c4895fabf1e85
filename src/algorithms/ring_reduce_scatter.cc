// Ring reduce-scatter, pipelined in segments.
//
// At step t (0 .. n-2) rank r sends chunk r-t-1 to its right neighbour and
// receives chunk r-t-2 from its left, adding its own contribution; the
// chunk received at the last step is chunk r, complete. Every chunk is cut
// into segments, and a segment is forwarded as soon as it is reduced, so a
// step never waits for the whole previous one. Received segments land in a
// ring of scratch slots; a slot is reused only once its forward has left.
#include <cstring>

#include "algorithms/algorithms.h"

namespace fairway {
Status ringReduceScatter(CollectiveContext& ctx, const void* send, void* out, const ChunkLayout& layout) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const Reducer& reducer = ctx.reducer();
  const size_t mine = layout.chunkCount(r);
  if (n == 1) {
    if (out != send) std::memcpy(out, send, mine * ctx.elementSize());
    reducer.finalize(out, mine);
    return Status::ok();
  }
  const int left = positiveMod(r - 1, n);
  const int right = (r + 1) % n;
  const Segments seg = ctx.segments();
  const int window = ctx.pipelineDepth();
  const int slots = 2 * window;

  // Step 0 sends this rank's own contribution to chunk r-1 straight from send.
  const int firstChunk = positiveMod(r - 1, n);
  const size_t firstCount = layout.chunkCount(firstChunk);
  const size_t firstSegments = seg.countFor(firstCount);

  char* slotBuffer = static_cast<char*>(ctx.scratch().bytes(slots * seg.segmentElems * ctx.elementSize()));
  Pending* recvs = ctx.scratch().pendings(2 * slots + firstSegments);
  Pending* forwards = recvs + slots;
  Pending* initial = forwards + slots;
  auto slotAt = [&](size_t unit) { return slotBuffer + (unit % slots) * seg.segmentElems * ctx.elementSize(); };

  for (size_t j = 0; j < firstSegments; ++j) {
    FW_RETURN_IF_ERROR(ctx.send(right, ctx.at(send, layout.chunkOffset(firstChunk) + seg.offset(j)),
                                seg.length(firstCount, j), static_cast<uint32_t>(j), &initial[j]));
  }

  RingCursor posted(layout, seg, r, 2);
  RingCursor done = posted;
  auto postNext = [&]() -> Status {
    size_t slot = posted.unit() % slots;
    FW_RETURN_IF_ERROR(ctx.wait(&forwards[slot]));  // the slot's previous forward has left
    FW_RETURN_IF_ERROR(ctx.recv(left, slotAt(posted.unit()), posted.length(), static_cast<uint32_t>(posted.unit()), &recvs[slot]));
    posted.advance();
    return Status::ok();
  };
  for (int i = 0; i < window && !posted.atEnd(); ++i) FW_RETURN_IF_ERROR(postNext());

  while (!done.atEnd()) {
    size_t slot = done.unit() % slots;
    FW_RETURN_IF_ERROR(ctx.wait(&recvs[slot]));
    const size_t len = done.length();
    const char* own = ctx.at(send, done.offset());
    char* received = slotAt(done.unit());
    if (done.step() == n - 2) {  // chunk r: the last contribution
      char* dst = ctx.at(out, seg.offset(done.segment()));
      reducer.combine(dst, own, received, len);
      reducer.finalize(dst, len);
    } else {
      reducer.combine(received, received, own, len);
      FW_RETURN_IF_ERROR(
          ctx.send(right, received, len, static_cast<uint32_t>(firstSegments + done.unit()), &forwards[slot]));
    }
    done.advance();
    if (!posted.atEnd()) FW_RETURN_IF_ERROR(postNext());
  }
  FW_RETURN_IF_ERROR(ctx.waitAll(initial, firstSegments));
  return ctx.waitAll(forwards, slots);
}

}  // namespace fairway
