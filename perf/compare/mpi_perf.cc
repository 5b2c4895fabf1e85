// Open MPI's collectives (MPI_Allreduce, MPI_Reduce_scatter_block,
// MPI_Allgather, MPI_Bcast from rank 0, MPI_Alltoall) on the sweep and columns of Fairway's perf binaries, for
// scripts/compare.sh. Launch with mpirun.
#include <mpi.h>

#include <vector>

#include "perf/compare/peer_sweep.h"

using namespace fairway::peer;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  Options o;
  if (!parseOptions(argc, argv, &o)) {
    if (rank == 0) usage(argv[0]);
    MPI_Finalize();
    return 2;
  }
  std::vector<float> send(o.maxBytes / sizeof(float) + 1, 1.0f), recv(o.maxBytes / sizeof(float) + 1, 0.0f);
  auto run = [&](size_t block) {
    const int n = static_cast<int>(block);
    switch (o.collective) {
      case Collective::AllReduce:
        MPI_Allreduce(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
      case Collective::ReduceScatter:
        MPI_Reduce_scatter_block(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
      case Collective::AllGather:
        MPI_Allgather(send.data(), n, MPI_FLOAT, recv.data(), n, MPI_FLOAT, MPI_COMM_WORLD);
        break;
      case Collective::Broadcast:
        MPI_Bcast(send.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
      case Collective::AllToAll:
        MPI_Alltoall(send.data(), n, MPI_FLOAT, recv.data(), n, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    }
  };
  auto mean = [&](double x) {
    double sum = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / nranks;
  };
  sweep(o, "Open MPI", rank, nranks, run, [] { MPI_Barrier(MPI_COMM_WORLD); }, mean, nothingToFinish);
  MPI_Finalize();
  return 0;
}
