// Elementwise reduction of two buffers for one (datatype, op) pair.
#pragma once

#include <cstddef>

#include "fairway/fairway.h"

namespace fairway {

class Reducer {
 public:
  using CombineFn = void (*)(void* dst, const void* a, const void* b, size_t count);
  using FinalizeFn = void (*)(void* buf, size_t count, int divisor);

  // op and datatype must already be validated (isOpDefinedFor). fwAvg
  // combines as a sum; finalize() then divides by nranks.
  Reducer(fwDataType_t datatype, fwRedOp_t op, int nranks);

  // dst[i] = a[i] op b[i]; dst may be a or b, but may not partially overlap them.
  void combine(void* dst, const void* a, const void* b, size_t count) const { combine_(dst, a, b, count); }
  // The same combination with nothing to finalize: for the phases of a
  // composite algorithm, whose last step finalizes with the full reducer.
  Reducer withoutFinalize() const {
    Reducer r = *this;
    r.finalize_ = nullptr;
    return r;
  }
  // Applied once to each fully reduced element (avg's division).
  void finalize(void* buf, size_t count) const {
    if (finalize_ != nullptr) finalize_(buf, count, nranks_);
  }

  // What it computes, for reductions that run elsewhere (a device kernel):
  // combine with op (avg combines as a sum), and, when finalizes(), divide
  // each complete element by divisor().
  fwDataType_t datatype() const { return datatype_; }
  fwRedOp_t op() const { return op_; }
  bool finalizes() const { return finalize_ != nullptr; }
  int divisor() const { return nranks_; }

 private:
  fwDataType_t datatype_;
  fwRedOp_t op_;
  CombineFn combine_;
  FinalizeFn finalize_;
  int nranks_;
};

}  // namespace fairway
