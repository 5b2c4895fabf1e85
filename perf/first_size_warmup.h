// The warm-up rule every benchmark binary follows, Fairway's and the
// peers' alike: -w iterations before each size and, before the first size
// of a run, more until rank 0 has spent kFirstSizeWarmupMs on them. A
// fresh process runs its first size slower for longer than a few
// iterations (the first touches of its buffers and the libraries' pools,
// caches, the core's clock): a 2-rank 128 KiB allreduce read 8.9-9.6 GB/s
// as the first size with 10 warm-up iterations, 10.5-10.8 after another
// size in the same process.
#pragma once

#include <chrono>

namespace fairway::perf {

constexpr int kFirstSizeWarmupMs = 100;

// runBatch() runs some iterations and waits for them; agree(wanted) is a
// collective that returns whether any rank wanted more (only rank 0 asks,
// so every rank gets the same answer). Both return false on failure.
template <typename RunBatch, typename Agree>
bool warmUpFirstSize(int rank, RunBatch runBatch, Agree agree) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const bool wanted =
        rank == 0 && std::chrono::steady_clock::now() - start < std::chrono::milliseconds(kFirstSizeWarmupMs);
    bool more = false;
    if (!agree(wanted, &more)) return false;
    if (!more) return true;
    if (!runBatch()) return false;
  }
}

}  // namespace fairway::perf
