// How a buffer of count elements is cut into n chunks (ranks' shares) and
// each chunk into pipeline segments.
#pragma once

#include <algorithm>
#include <cstddef>

namespace fairway {

// n nearly equal chunks: the first count % n chunks hold one element more.
// With a stride, chunk c starts at c * stride instead (equal chunks that
// need not touch, e.g. one slice of every rank's block).
struct ChunkLayout {
  size_t count = 0;
  int n = 1;
  size_t stride = 0;
  size_t chunkCount(int c) const { return count / n + (static_cast<size_t>(c) < count % n ? 1 : 0); }
  size_t chunkOffset(int c) const {
    if (stride != 0) return static_cast<size_t>(c) * stride;
    return static_cast<size_t>(c) * (count / n) + std::min(static_cast<size_t>(c), count % n);
  }
};

// n chunks of exactly `each` elements (reduce-scatter, allgather).
inline ChunkLayout equalChunks(size_t each, int n) { return ChunkLayout{each * static_cast<size_t>(n), n, 0}; }
// n chunks of `each` elements, chunk c at c * stride (stride >= each).
inline ChunkLayout stridedChunks(size_t each, int n, size_t stride) {
  return ChunkLayout{each * static_cast<size_t>(n), n, stride};
}

struct Segments {
  size_t segmentElems = 1;
  size_t countFor(size_t chunkElems) const { return (chunkElems + segmentElems - 1) / segmentElems; }
  size_t offset(size_t j) const { return j * segmentElems; }
  size_t length(size_t chunkElems, size_t j) const { return std::min(segmentElems, chunkElems - j * segmentElems); }
};

inline int positiveMod(int value, int n) { return ((value % n) + n) % n; }

}  // namespace fairway

namespace fairway {

// Walks the (step, segment) receive units of a ring schedule in order,
// skipping empty chunks. At step t a rank receives chunk rank - t - lag.
// Units are numbered 0, 1, ... the same way on sender and receiver.
class RingCursor {
 public:
  RingCursor(const ChunkLayout& layout, Segments seg, int rank, int lag)
      : layout_(&layout), seg_(seg), rank_(rank), lag_(lag), steps_(layout.n - 1) {
    skipEmpty();
  }
  int step() const { return t_; }
  size_t segment() const { return j_; }
  size_t unit() const { return unit_; }
  int chunk() const { return positiveMod(rank_ - t_ - lag_, layout_->n); }
  size_t offset() const { return layout_->chunkOffset(chunk()) + seg_.offset(j_); }
  size_t length() const { return seg_.length(layout_->chunkCount(chunk()), j_); }
  bool atEnd() const { return t_ >= steps_; }
  void advance() { ++j_; ++unit_; skipEmpty(); }
  // How many units the whole schedule has.
  size_t totalUnits() const {
    RingCursor c = *this;
    while (!c.atEnd()) c.advance();
    return c.unit();
  }

 private:
  void skipEmpty() {
    while (t_ < steps_ && j_ >= seg_.countFor(layout_->chunkCount(chunk()))) { ++t_; j_ = 0; }
  }
  const ChunkLayout* layout_;
  Segments seg_;
  int rank_, lag_, steps_;
  int t_ = 0;
  size_t j_ = 0;
  size_t unit_ = 0;
};

}  // namespace fairway
