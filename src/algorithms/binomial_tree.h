// A binomial tree over ranks renumbered so the root is 0: a rank's parent
// clears its lowest set bit; its children add each lower power of two.
#pragma once

#include "algorithms/chunk_layout.h"

namespace fairway {

struct BinomialTree {
  int n, root, vrank;
  BinomialTree(int size, int rank, int rootRank) : n(size), root(rootRank), vrank(positiveMod(rank - rootRank, size)) {}

  int real(int v) const { return (v + root) % n; }
  int lowBit() const { return vrank == 0 ? 0 : (vrank & -vrank); }
  int parent() const { return real(vrank - lowBit()); }
  // Children, largest subtree first: vrank + mask for mask below lowBit.
  template <typename F>
  void forEachChild(F&& f) const {
    int top = 1;
    while (top < n) top *= 2;
    int limit = vrank == 0 ? top : lowBit();
    for (int mask = limit / 2; mask >= 1; mask /= 2) {
      if (vrank + mask < n) f(real(vrank + mask));
    }
  }
  int childCount() const {
    int c = 0;
    forEachChild([&](int) { ++c; });
    return c;
  }
};

}  // namespace fairway
