// NCCL's own collectives (ncclAllReduce, ncclReduceScatter, ncclAllGather,
// ncclBroadcast, and all-to-all as grouped ncclSend/ncclRecv)
// on device buffers of float32 or bfloat16, on the sweep and columns of Fairway's perf binaries,
// for scripts/compare.sh -m cuda. Rank, size and local rank come from the
// launcher's variables; each rank takes the GPU of its local rank (NCCL
// needs one GPU per rank); rank 0's unique id reaches the others through a
// file in PEER_STORE_DIR, so no MPI library is needed.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "perf/compare/peer_sweep.h"

using namespace fairway::peer;

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "nccl_perf: %s\n", what.c_str());
  std::exit(1);
}

void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) fail(std::string(call) + ": " + cudaGetErrorString(e));
}
void check(ncclResult_t r, const char* call) {
  if (r != ncclSuccess) fail(std::string(call) + ": " + ncclGetErrorString(r));
}

// Rank 0 writes the id under a temporary name and renames it, so a reader
// never sees half of it; the others wait for the file, bounded.
ncclUniqueId exchangeId(int rank, const std::string& dir) {
  const std::string path = dir + "/nccl_unique_id";
  ncclUniqueId id;
  if (rank == 0) {
    check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    {
      std::ofstream out(path + ".partial", std::ios::binary);
      out.write(id.internal, sizeof(id.internal));
      if (!out) fail("cannot write " + path + ".partial");
    }
    if (std::rename((path + ".partial").c_str(), path.c_str()) != 0) fail("cannot rename to " + path);
    return id;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in.read(id.internal, sizeof(id.internal))) return id;
    if (std::chrono::steady_clock::now() > deadline) fail("rank 0's id did not appear in " + path + " within 60 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

int main(int argc, char** argv) {
  LaunchedPeer peer;
  if (!parseLaunchedPeer(argc, argv, &peer)) return 2;
  const Options& o = peer.options;
  const int rank = peer.rank, nranks = peer.size, localSize = launcherLocalSize();
  // Refusals (no GPU, too few GPUs) exit 2, as the perf binaries' -m cuda does.
  if (o.inPlace) {
    if (rank == 0) std::fprintf(stderr, "nccl_perf: -I 1: NCCL is compared out of place only\n");
    return 2;
  }
  int devices = 0;
  if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "nccl_perf: no usable CUDA device: %s\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
    return 2;
  }
  if (localSize > devices) {
    std::fprintf(stderr, "nccl_perf: %d ranks on this node and %d GPU(s): NCCL needs a GPU per rank\n", localSize,
                 devices);
    return 2;
  }
  check(cudaSetDevice(launcherLocalRank() % devices), "cudaSetDevice");
  ncclUniqueId id = exchangeId(rank, peer.storeDir);
  ncclComm_t comm;
  check(ncclCommInitRank(&comm, nranks, id, rank), "ncclCommInitRank");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

  const size_t capacity = o.maxBytes + sizeof(float);
  void *send = nullptr, *recv = nullptr;
  double* scalar = nullptr;
  check(cudaMalloc(&send, capacity), "cudaMalloc");
  check(cudaMalloc(&recv, capacity), "cudaMalloc");
  check(cudaMalloc(&scalar, sizeof(double)), "cudaMalloc");
  check(cudaMemset(send, 0, capacity), "cudaMemset");

  const ncclDataType_t type = o.type == DataType::Float32 ? ncclFloat : ncclBfloat16;
  const size_t es = elementSize(o.type);
  auto run = [&](size_t block) {
    switch (o.collective) {
      case Collective::AllReduce:
        check(ncclAllReduce(send, recv, block, type, ncclSum, comm, stream), "ncclAllReduce");
        break;
      case Collective::ReduceScatter:
        check(ncclReduceScatter(send, recv, block, type, ncclSum, comm, stream), "ncclReduceScatter");
        break;
      case Collective::AllGather:
        check(ncclAllGather(send, recv, block, type, comm, stream), "ncclAllGather");
        break;
      case Collective::Broadcast:
        check(ncclBroadcast(send, recv, block, type, 0, comm, stream), "ncclBroadcast");
        break;
      case Collective::AllToAll:  // NCCL has no all-to-all: a group of sends and receives, as nccl-tests does
        check(ncclGroupStart(), "ncclGroupStart");
        for (int peer = 0; peer < nranks; ++peer) {
          check(ncclSend(static_cast<char*>(send) + peer * block * es, block, type, peer, comm, stream), "ncclSend");
          check(ncclRecv(static_cast<char*>(recv) + peer * block * es, block, type, peer, comm, stream), "ncclRecv");
        }
        check(ncclGroupEnd(), "ncclGroupEnd");
        break;
    }
  };
  auto finish = [&] { check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); };
  auto mean = [&](double x) {
    check(cudaMemcpy(scalar, &x, sizeof x, cudaMemcpyHostToDevice), "cudaMemcpy");
    check(ncclAllReduce(scalar, scalar, 1, ncclDouble, ncclSum, comm, stream), "ncclAllReduce");
    finish();
    check(cudaMemcpy(&x, scalar, sizeof x, cudaMemcpyDeviceToHost), "cudaMemcpy");
    return x / nranks;
  };
  // A one-element allreduce, waited for, is a barrier.
  auto barrier = [&] { mean(0); };
  sweep(o, "NCCL", rank, nranks, run, barrier, mean, finish);

  check(ncclCommDestroy(comm), "ncclCommDestroy");
  cudaFree(scalar);
  cudaFree(recv);
  cudaFree(send);
  cudaStreamDestroy(stream);
  return 0;
}
