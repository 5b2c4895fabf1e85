// Open MPI's collectives (MPI_Allreduce, MPI_Reduce_scatter_block,
// MPI_Allgather, MPI_Bcast from rank 0, MPI_Alltoall), out of place or with
// MPI_IN_PLACE, on the sweep and columns of Fairway's perf binaries, for
// scripts/compare.sh. Launch with mpirun.
#include <mpi.h>

#include <cstdio>

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
  if (o.type != DataType::Float32) {
    // MPI 4.1, which Open MPI 4.1 implements, has no bfloat16 type.
    if (rank == 0) std::fprintf(stderr, "mpi_perf: -d %s: MPI has no such type\n", typeName(o.type));
    MPI_Finalize();
    return 2;
  }
  HostBuffer sendBuffer(o.type, o.maxBytes, true), recvBuffer(o.type, o.maxBytes, false);
  float* send = static_cast<float*>(sendBuffer.data());
  float* recv = static_cast<float*>(recvBuffer.data());
  // In place (-I 1) the input is recv's, as MPI_IN_PLACE says for each call.
  const bool inPlace = o.inPlace;
  auto run = [&](size_t block) {
    const int n = static_cast<int>(block);
    switch (o.collective) {
      case Collective::AllReduce:
        MPI_Allreduce(inPlace ? MPI_IN_PLACE : send, recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
      case Collective::ReduceScatter:
        MPI_Reduce_scatter_block(inPlace ? MPI_IN_PLACE : send, recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
      case Collective::AllGather:
        if (inPlace) {
          MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, MPI_FLOAT, MPI_COMM_WORLD);
        } else {
          MPI_Allgather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, MPI_COMM_WORLD);
        }
        break;
      case Collective::Broadcast:
        MPI_Bcast(send, n, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
      case Collective::AllToAll:
        if (inPlace) {
          MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, MPI_FLOAT, MPI_COMM_WORLD);
        } else {
          MPI_Alltoall(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, MPI_COMM_WORLD);
        }
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
