// Compressed reduce-scatter, allreduce and allgather: each element is
// quantized once per level it crosses, never once per hop.
//
// The ranks form M groups of D ("nodes"); rank (m, d) is local rank d of
// group m, and the ranks with the same d form its rail. Flat: D = 1, every
// rank its own group, so every byte crosses compressed. Hierarchical (the
// qgZ shape): the nodes of a uniform layout, so only the rails compress.
// Every rank owns one block of the buffer: for reduce-scatter its chunk,
// for allreduce the q-th of n equal blocks (the last ones shorter, maybe
// empty). Blocks are cut into slices of whole quantization blocks, so the
// result does not depend on how the pipeline slices them. Per slice:
//  A. (D > 1) the slice of every block, plus the residual, packed by local
//     rank and reduced over the node in full precision: local rank d holds
//     the node's sums of the blocks of its rail. Each of those M pieces is
//     encoded once and sent to its owner on the rail;
//  B. the owner decodes the M pieces it received and sums them in float32,
//     in group order (so every layout sums alike). Reduce-scatter: done.
//     Allreduce: the reduced piece is encoded once more and sent to the
//     rest of the rail;
//  C. (allreduce) everyone decodes the same encoded pieces, so every rank
//     ends with the same bits; (D > 1) the node then shares its rail's
//     pieces by an allgather in full precision.
// Stage B of slice s runs one slice after its stage A and stage C one more
// after that, so quantizing and the node phase overlap the rail exchanges.
// Every step runs on the data's memory (the data space's kernels: the
// CPU's, or the device's). When the rail works in other memory (device
// buffers, UCX only reaching pinned host memory), the encoded pieces are
// copied there before they are sent and back after they arrive: only the
// compressed bytes cross the staging.
//
// Error feedback: the residual is added where the input is read (encoded
// directly when D = 1, packed when D > 1), and receives what each of this
// rank's encodings lost at the positions it encoded, in the input's units
// (an average's reduced piece counts n times). What the node phase passed
// on in full precision is not lost, so those positions are cleared.
#include <algorithm>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/data_space.h"
#include "algorithms/registry.h"
#include "algorithms/two_phase.h"
#include "collective/collective_args.h"
#include "core/quantize_kernels.h"

namespace fairway {
namespace {

class CompressedPipeline {
 public:
  CompressedPipeline(CollectiveContext& ctx, const Compression& c, CollectiveKind kind, const void* send, void* recv,
                     size_t count)
      : ctx_(ctx), space_(ctx.dataSpace()), c_(c), kind_(kind), send_(static_cast<const char*>(send)),
        recv_(static_cast<char*>(recv)), count_(count), type_(ctx.reducer().datatype()), es_(ctx.elementSize()) {}

  // Flat: every rank its own group, the whole context as the rail.
  Status runFlat() {
    m_ = ctx_.rank();
    M_ = ctx_.size();
    owners_.resize(M_);
    for (int q = 0; q < M_; ++q) owners_[q] = q;
    return run(nullptr, ctx_);
  }

  // Hierarchical over ctx.layout()'s nodes (uniform).
  Status runHierarchical() {
    TwoPhaseSetup t(ctx_, /*reduces=*/true);
    FW_RETURN_IF_ERROR(t.status);
    const TwoPhaseGroups& g = t.groups;
    d_ = g.d;
    D_ = g.D;
    m_ = g.m;
    M_ = g.M;
    owners_.resize(static_cast<size_t>(M_) * D_);
    for (int m = 0; m < M_; ++m) {
      for (int d = 0; d < D_; ++d) owners_[static_cast<size_t>(m) * D_ + d] = g.rankAt(m, d);
    }
    return run(D_ > 1 ? &t.node : nullptr, t.rail);
  }

 private:
  bool allreduce() const { return kind_ == CollectiveKind::AllReduce; }
  int owner(int m, int d) const { return owners_[static_cast<size_t>(m) * D_ + d]; }
  int self() const { return owner(m_, d_); }
  // Where owner q's block starts in the input (and, for allreduce, output),
  // and how many of its blockLen_ elements are real.
  size_t blockStart(int q) const { return static_cast<size_t>(q) * blockLen_; }
  size_t realBlock(int q) const {
    if (!allreduce()) return count_;
    const size_t start = blockStart(q);
    return start >= count_ ? 0 : std::min(blockLen_, count_ - start);
  }
  size_t sliceStart(size_t s) const { return s * sliceLen_; }
  size_t realSlice(int q, size_t s) const {
    const size_t real = realBlock(q), start = sliceStart(s);
    return start >= real ? 0 : std::min(sliceLen_, real - start);
  }
  float* residualAt(int q, size_t s) const {
    return c_.residual != nullptr ? c_.residual + blockStart(q) + sliceStart(s) : nullptr;
  }
  const char* inputAt(int q, size_t s) const { return send_ + (blockStart(q) + sliceStart(s)) * es_; }

  Status run(CollectiveContext* node, CollectiveContext& rail) {
    node_ = node;
    // The rail exchanges carry encoded bytes.
    CollectiveContext railBytes = rail.withElementSize(1);
    rail_ = &railBytes;
    const int n = ctx_.size();
    staged_ = ctx_.railStaged();
    blockLen_ = allreduce() ? (count_ + n - 1) / n : count_;
    if (blockLen_ == 0) return Status::ok();
    // Slices of whole quantization blocks (casts: any length).
    const PipelineSettings& p = ctx_.pipeline();
    const size_t wanted = sliceCount(p, blockLen_ * n * es_, blockLen_, 1, es_);
    const size_t unit = c_.blockwise() ? static_cast<size_t>(c_.blockSize) : 1;
    sliceLen_ = (blockLen_ + wanted - 1) / wanted;
    sliceLen_ = (sliceLen_ + unit - 1) / unit * unit;
    slices_ = (blockLen_ + sliceLen_ - 1) / sliceLen_;
    allocate();

    const size_t lastStage = allreduce() ? 2 : 1;
    for (size_t s = 0; s < slices_ + lastStage; ++s) {
      if (s < slices_) FW_RETURN_IF_ERROR(encodeAndSend(s));
      if (s >= 1 && s - 1 < slices_) FW_RETURN_IF_ERROR(reduce(s - 1));
      if (allreduce() && s >= 2 && s - 2 < slices_) FW_RETURN_IF_ERROR(decodeAll(s - 2));
    }
    return Status::ok();
  }

  // Scratch: per slot the encoded pieces out and in of each rail exchange;
  // once, the packed node input, the ring's partial sums and the node
  // sums (D > 1), and the float32 accumulator.
  void allocate() {
    slots_ = allreduce() ? 3 : 2;
    stride_ = c_.encodedStride(sliceLen_);
    const size_t perSlot = (2 * M_ + (allreduce() ? M_ + 1 : 0)) * stride_;
    const size_t packedBytes = D_ > 1 ? static_cast<size_t>(D_) * M_ * sliceLen_ * es_ : 0;
    const size_t bytes = slots_ * perSlot + 3 * packedBytes + sliceLen_ * sizeof(float) + 64 * 8;
    char* base = ctx_.outerBytes(bytes);
    auto take = [&](size_t size) {
      char* at = base;
      base += (size + 63) & ~size_t{63};
      return at;
    };
    // The kernels work in the data's memory; the rail exchanges the same
    // slots in rail memory, copied there and back when the two differ.
    workBase_ = take(slots_ * perSlot);
    railBase_ = staged_ ? ctx_.railBytes(slots_ * perSlot + 64) : workBase_;
    slotBytes_ = perSlot;
    packed_ = take(packedBytes);
    partial_ = take(packedBytes);
    shared_ = take(packedBytes);
    acc_ = reinterpret_cast<float*>(take(sliceLen_ * sizeof(float)));
    const size_t perExchange = RailExchange::pendingsFor(M_, ctx_.pipeline().railPeersInFlight);
    pendings_ = ctx_.outerPendings(2 * slots_ * perExchange + 1);
    exchanges_.assign(2 * slots_, RailExchange());
  }
  // The steps, on the buffers' memory (the CPU's kernels, or the device's).
  kernels::CodecStep step(kernels::CodecStep::Op op, const void* src, void* dst, size_t count) const {
    kernels::CodecStep st;
    st.op = op;
    st.format = c_.kind;
    st.blockSize = c_.blockSize;
    st.valueType = type_;
    st.src = src;
    st.dst = dst;
    st.count = count;
    return st;
  }
  Status encode(const void* src, fwDataType_t valueType, const float* add, size_t count, void* dst,
                kernels::Lost lost) {
    kernels::CodecStep st = step(kernels::CodecStep::Op::Encode, src, dst, count);
    st.valueType = valueType;
    st.add = add;
    st.lost = lost;
    return space_.codec(st);
  }

  // Slot s's encoded pieces: in the data's memory (the kernels'), or in
  // the rail's (the messages').
  enum Memory { kWork, kRail };
  char* slot(size_t s, Memory m) const { return (m == kWork ? workBase_ : railBase_) + (s % slots_) * slotBytes_; }
  char* encodedOut(size_t s, int j, Memory m = kWork) const { return slot(s, m) + j * stride_; }
  char* encodedIn(size_t s, int j, Memory m = kWork) const { return slot(s, m) + (M_ + j) * stride_; }
  char* reducedIn(size_t s, int j, Memory m = kWork) const { return slot(s, m) + (2 * M_ + j) * stride_; }
  char* reducedOut(size_t s, Memory m = kWork) const { return slot(s, m) + 3 * static_cast<size_t>(M_) * stride_; }
  // Staged: the kernels' pieces to the rail's memory before a send, the
  // received ones back after it.
  Status toRail(char* work, char* rail, size_t bytes) { return staged_ ? space_.copy(rail, work, bytes) : Status::ok(); }
  Status fromRail(char* rail, char* work, size_t bytes) { return staged_ ? space_.copy(work, rail, bytes) : Status::ok(); }
  // Slot s's exchange (which 0) and, for allreduce, its diffuse (which 1).
  Pending* pendingsOf(size_t s, int which) const {
    const size_t perExchange = RailExchange::pendingsFor(M_, ctx_.pipeline().railPeersInFlight);
    return pendings_ + ((s % slots_) * 2 + which) * perExchange;
  }
  RailExchange& exchange(size_t s, int which) { return exchanges_[(s % slots_) * 2 + which]; }
  uint32_t step(size_t s, int which) const { return static_cast<uint32_t>(2 * s + which); }

  // Stage A.
  Status encodeAndSend(size_t s) {
    if (node_ != nullptr) FW_RETURN_IF_ERROR(reduceInNode(s));
    for (int j = 0; j < M_; ++j) {
      const int q = owner(j, d_);
      const size_t len = realSlice(q, s);
      if (node_ == nullptr) {  // the input itself, plus the residual
        float* residual = residualAt(q, s);
        FW_RETURN_IF_ERROR(
            encode(inputAt(q, s), type_, residual, len, encodedOut(s, j), kernels::Lost{residual, 1, false}));
      } else {  // the node's sums
        FW_RETURN_IF_ERROR(encode(shared_ + j * sliceLen_ * es_, type_, nullptr, len, encodedOut(s, j),
                                  kernels::Lost{residualAt(q, s), 1, true}));
      }
    }
    FW_RETURN_IF_ERROR(toRail(encodedOut(s, 0), encodedOut(s, 0, kRail), M_ * stride_));
    const size_t mine = c_.encodedBytes(realSlice(self(), s));
    return exchange(s, 0).start(
        *rail_, step(s, 0), pendingsOf(s, 0), [this, s](int j) -> const void* { return encodedOut(s, j, kRail); },
        [this, s](int j) { return c_.encodedBytes(realSlice(owner(j, d_), s)); },
        [this, s](int j) -> void* { return encodedIn(s, j, kRail); }, [mine](int) { return mine; });
  }

  // Stage A's node phase: slice s of every block, plus the residual
  // (which is then cleared), packed by local rank; the ring leaves this
  // rank's rail's sums in shared_.
  Status reduceInNode(size_t s) {
    const size_t piece = sliceLen_ * es_;
    for (int d = 0; d < D_; ++d) {
      for (int m = 0; m < M_; ++m) {
        const int q = owner(m, d);
        const size_t len = realSlice(q, s);
        char* to = packed_ + (static_cast<size_t>(d) * M_ + m) * piece;
        float* residual = residualAt(q, s);
        if (residual != nullptr) {
          kernels::CodecStep add = step(kernels::CodecStep::Op::AddFloat, inputAt(q, s), to, len);
          add.add = residual;
          FW_RETURN_IF_ERROR(space_.codec(add));
          FW_RETURN_IF_ERROR(space_.zero(residual, len * sizeof(float)));
        } else {
          FW_RETURN_IF_ERROR(ctx_.copy(to, inputAt(q, s), len));
        }
        FW_RETURN_IF_ERROR(space_.zero(to + len * es_, piece - len * es_));
      }
    }
    return ctx_.nodePhase().reduceScatter(*node_, packed_, shared_, equalChunks(static_cast<size_t>(M_) * sliceLen_, D_),
                                          partial_);
  }

  // Stage B.
  Status reduce(size_t s) {
    FW_RETURN_IF_ERROR(exchange(s, 0).finish());
    FW_RETURN_IF_ERROR(fromRail(encodedIn(s, 0, kRail), encodedIn(s, 0), M_ * stride_));
    const size_t len = realSlice(self(), s);
    for (int j = 0; j < M_; ++j) {
      kernels::CodecStep add = step(kernels::CodecStep::Op::DecodeAdd, j == m_ ? encodedOut(s, j) : encodedIn(s, j),
                                    acc_, len);
      add.first = j == 0;
      FW_RETURN_IF_ERROR(space_.codec(add));
    }
    const bool average = ctx_.reducer().finalizes();
    if (average) FW_RETURN_IF_ERROR(space_.finalize(Reducer(fwFloat32, fwAvg, ctx_.size()), acc_, len));
    float* residual = residualAt(self(), s);
    if (!allreduce()) {
      return space_.codec(step(kernels::CodecStep::Op::FromFloat, acc_, recv_ + sliceStart(s) * es_, len));
    }
    const float weight = average ? static_cast<float>(ctx_.size()) : 1.f;
    FW_RETURN_IF_ERROR(encode(acc_, fwFloat32, nullptr, len, reducedOut(s), kernels::Lost{residual, weight, true}));
    const size_t mine = c_.encodedBytes(len);
    FW_RETURN_IF_ERROR(toRail(reducedOut(s), reducedOut(s, kRail), stride_));
    return exchange(s, 1).start(
        *rail_, step(s, 1), pendingsOf(s, 1), [this, s](int) -> const void* { return reducedOut(s, kRail); },
        [mine](int) { return mine; }, [this, s](int j) -> void* { return reducedIn(s, j, kRail); },
        [this, s](int j) { return c_.encodedBytes(realSlice(owner(j, d_), s)); });
  }

  // Stage C (allreduce).
  Status decodeAll(size_t s) {
    FW_RETURN_IF_ERROR(exchange(s, 1).finish());
    FW_RETURN_IF_ERROR(fromRail(reducedIn(s, 0, kRail), reducedIn(s, 0), M_ * stride_));
    const size_t piece = sliceLen_ * es_;
    for (int j = 0; j < M_; ++j) {
      const int q = owner(j, d_);
      const char* encoded = j == m_ ? reducedOut(s) : reducedIn(s, j);
      char* out = node_ == nullptr ? recv_ + (blockStart(q) + sliceStart(s)) * es_
                                   : packed_ + (static_cast<size_t>(d_) * M_ + j) * piece;
      FW_RETURN_IF_ERROR(space_.codec(step(kernels::CodecStep::Op::Decode, encoded, out, realSlice(q, s))));
    }
    if (node_ == nullptr) return Status::ok();
    FW_RETURN_IF_ERROR(ctx_.nodePhase().allgather(*node_, packed_, equalChunks(static_cast<size_t>(M_) * sliceLen_, D_)));
    for (int d = 0; d < D_; ++d) {
      for (int m = 0; m < M_; ++m) {
        const int q = owner(m, d);
        FW_RETURN_IF_ERROR(ctx_.copy(recv_ + (blockStart(q) + sliceStart(s)) * es_,
                                     packed_ + (static_cast<size_t>(d) * M_ + m) * piece, realSlice(q, s)));
      }
    }
    return Status::ok();
  }

  CollectiveContext& ctx_;
  DataSpace& space_;
  const Compression c_;
  const CollectiveKind kind_;
  const char* send_;
  char* recv_;
  const size_t count_;
  const fwDataType_t type_;
  const size_t es_;

  int d_ = 0, D_ = 1, m_ = 0, M_ = 1;
  std::vector<int> owners_;  // owners_[m * D + d]: the rank of local rank d of group m
  CollectiveContext* node_ = nullptr;
  CollectiveContext* rail_ = nullptr;
  size_t blockLen_ = 0, sliceLen_ = 0, slices_ = 0;
  size_t slots_ = 0, stride_ = 0, slotBytes_ = 0;
  bool staged_ = false;  // the rail works in other memory than the data (device data, pinned rail)
  char* workBase_ = nullptr;
  char* railBase_ = nullptr;
  char* packed_ = nullptr;
  char* partial_ = nullptr;
  char* shared_ = nullptr;
  float* acc_ = nullptr;
  Pending* pendings_ = nullptr;
  std::vector<RailExchange> exchanges_;
};

}  // namespace

Status compressedReduceScatter(CollectiveContext& ctx, const void* send, void* recv, size_t count,
                               const Compression& c, bool hierarchical) {
  CompressedPipeline run(ctx, c, CollectiveKind::ReduceScatter, send, recv, count);
  return hierarchical ? run.runHierarchical() : run.runFlat();
}

Status compressedAllreduce(CollectiveContext& ctx, const void* send, void* recv, size_t count, const Compression& c,
                           bool hierarchical) {
  CompressedPipeline run(ctx, c, CollectiveKind::AllReduce, send, recv, count);
  return hierarchical ? run.runHierarchical() : run.runFlat();
}

Status compressedAllgather(CollectiveContext& ctx, const void* send, void* recv, size_t count, fwDataType_t type,
                           const Compression& c, PlainAllgather plain) {
  const size_t wireElement = c.encodedBytes(1);  // the casts: 2 bytes a value
  if (wireElement == 0 || c.blockwise()) {
    return Status(fwInternalError, "allgather reached the algorithm with a compression it has no cast for");
  }
  DataSpace& space = ctx.dataSpace();
  auto castStep = [&](kernels::CodecStep::Op op, const void* src, void* dst) {
    kernels::CodecStep st;
    st.op = op;
    st.format = c.kind;
    st.valueType = type;
    st.src = src;
    st.dst = dst;
    st.count = count;
    return space.codec(st);
  };
  const int n = ctx.size();
  const size_t blockBytes = count * wireElement;
  char* wire = ctx.stagingBytes(blockBytes * n + 64);
  char* mine = wire + blockBytes * ctx.rank();
  FW_RETURN_IF_ERROR(castStep(kernels::CodecStep::Op::Encode, send, mine));
  CollectiveContext wireCtx = ctx.withElementSize(wireElement);
  FW_RETURN_IF_ERROR(plain(wireCtx, makeArgs(CollectiveKind::AllGather, mine, wire, count)));
  for (int q = 0; q < n; ++q) {
    FW_RETURN_IF_ERROR(castStep(kernels::CodecStep::Op::Decode, wire + blockBytes * q, ctx.at(recv, count * q)));
  }
  return Status::ok();
}

// The compressed rows: allreduce and reduce-scatter of compressed calls.
namespace {
constexpr unsigned kCompressedCollectives = bitOf(CollectiveKind::AllReduce) | bitOf(CollectiveKind::ReduceScatter);

Status runCompressed(CollectiveContext& ctx, const CollectiveArgs& a, bool hierarchical) {
  if (a.kind == CollectiveKind::AllReduce) {
    return compressedAllreduce(ctx, a.send, a.recv, a.count, a.compression, hierarchical);
  }
  return compressedReduceScatter(ctx, a.send, a.recv, a.count, a.compression, hierarchical);
}
Status runCompressedFlat(CollectiveContext& ctx, const CollectiveArgs& a) { return runCompressed(ctx, a, false); }
Status runCompressedTwoPhase(CollectiveContext& ctx, const CollectiveArgs& a) { return runCompressed(ctx, a, true); }

// Allreduce is two passes (a reduce-scatter, then an allgather of the sums).
double compressedFlatCostUs(CollectiveKind kind, const CostTerms& t) {
  return (kind == CollectiveKind::AllReduce ? 2 : 1) * t.compressedFlatPassUs();
}
// The node phase moves full precision; only the rails carry encoded bytes.
double compressedTwoPhaseCostUs(CollectiveKind kind, const CostTerms& t) {
  const double rails = t.out.costUs(t.r * (t.M - 1) / t.M * t.S / t.R) + t.extraRounds;
  if (kind == CollectiveKind::AllReduce) return 2 * ((t.D - 1) * t.in.costUs(t.S / t.n * t.M) + rails);
  return (t.D - 1) * t.in.costUs(t.S / t.D) + rails;
}

const char* whyCompressedTwoPhaseCannotRun(const SelectionKey& key, const SelectionConditions& conditions) {
  if (const char* why = whyTwoPhaseLayoutRefuses(key)) return why;
  // It compresses between nodes only.
  if (key.layout->localSizeOf(0) == 1) return "each node holds one rank";
  if (key.onDevice && !(conditions.routes.ncclInNodes && key.ncclRunsIt) && !conditions.routes.ucxDirect) {
    return "its node phase would run UCX rings on device memory UCX cannot reach";
  }
  return nullptr;
}
}  // namespace

const AlgorithmRow kCompressedFlatRow = {"compressed_flat",
                                         kCompressedCollectives,
                                         runCompressedFlat,
                                         compressedFlatCostUs,
                                         nullptr,
                                         Placement::PointToPoint,
                                         /*ncclNodePhase=*/false,
                                         /*compressed=*/true};
const AlgorithmRow kCompressedTwoPhaseRow = {"compressed_twophase",
                                             kCompressedCollectives,
                                             runCompressedTwoPhase,
                                             compressedTwoPhaseCostUs,
                                             whyCompressedTwoPhaseCannotRun,
                                             Placement::NodeThenRails,
                                             /*ncclNodePhase=*/true,
                                             /*compressed=*/true};

}  // namespace fairway
