// Sums each rank's vector across all ranks. Run it under a launcher:
//   fairwayrun -np 4 ./allreduce_example
#include <fairway/fairway.hpp>

#include <cstdio>
#include <vector>

int main() {
  try {
    fairway::Communicator comm = fairway::Communicator::fromEnvironment();
    std::vector<float> grad(1 << 20, static_cast<float>(comm.rank() + 1));
    comm.allReduce(grad.data(), grad.data(), grad.size(), fwSum);  // in place
    const float expected = comm.size() * (comm.size() + 1) / 2.0f;
    if (grad.front() != expected || grad.back() != expected) {
      std::fprintf(stderr, "rank %d: got %g, expected %g\n", comm.rank(), grad.front(), expected);
      return 1;
    }
    if (comm.rank() == 0) std::printf("allreduce over %d ranks: every element is %g\n", comm.size(), expected);
  } catch (const fairway::Error& e) {
    std::fprintf(stderr, "fairway: %s\n", e.what());
    return 1;
  }
  return 0;
}
