// The same float32 sum sweep as all_reduce_perf, through MPI_Allreduce, with
// the same timing rule (mean over ranks of the per-iteration time after a
// barrier) and the same columns, so the two can be compared row by row.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  size_t minBytes = 8, maxBytes = 64 << 20;
  double factor = 2;
  int iters = 20, warmup = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "-b")) minBytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "-e")) maxBytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "-f")) factor = std::strtod(argv[i + 1], nullptr);
    else if (!std::strcmp(argv[i], "-n")) iters = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "-w")) warmup = std::atoi(argv[i + 1]);
  }
  std::vector<float> send(maxBytes / 4 + 1, 1.0f), recv(maxBytes / 4 + 1, 0.0f);
  if (rank == 0) std::printf("# mpi_all_reduce_perf: MPI_Allreduce float sum, %d ranks\n", nranks);
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes = static_cast<size_t>(bytes * factor)) {
    int count = static_cast<int>(bytes / 4);
    for (int i = 0; i < warmup; ++i) MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    double sum = 0;
    MPI_Allreduce(&us, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double mean = sum / nranks;
    double algbw = static_cast<double>(count) * 4 / mean / 1e3;
    if (rank == 0) {
      std::printf("%12zu  %12d  %8s  %6s  %6d  %7.2f  %6.2f  %6.2f\n", static_cast<size_t>(count) * 4, count, "float",
                  "sum", -1, mean, algbw, algbw * 2.0 * (nranks - 1) / nranks);
    }
  }
  MPI_Finalize();
  return 0;
}
