// Intel oneCCL's collectives (ccl::allreduce, reduce_scatter, allgather,
// broadcast from rank 0, alltoall) on host buffers of float32 or bfloat16,
// out of place or in place, on the sweep and columns of Fairway's perf binaries,
// for scripts/compare.sh. scripts/oneccl_peer.sh installs oneCCL and
// Intel MPI from PyPI and builds this against them; launch it with Intel
// MPI's mpiexec (PMI_RANK, PMI_SIZE) and PEER_STORE_DIR, a directory the
// ranks meet in: rank 0 writes oneCCL's key-value store address there.
#include <oneapi/ccl.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "perf/compare/peer_sweep.h"

using namespace fairway::peer;

namespace {

// Written whole (a rename), so a reader sees all of it or nothing.
bool publishAddress(const std::string& dir, const ccl::kvs::address_type& address) {
  const std::string path = dir + "/ccl-kvs", partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::binary);
    out.write(address.data(), static_cast<std::streamsize>(address.size()));
    if (!out) return false;
  }
  return std::rename(partial.c_str(), path.c_str()) == 0;
}

// Bounded: a rank 0 that never writes fails the run instead of hanging it.
bool readAddress(const std::string& dir, ccl::kvs::address_type* address) {
  const std::string path = dir + "/ccl-kvs";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path, std::ios::binary);
    if (in && in.read(address->data(), static_cast<std::streamsize>(address->size()))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  LaunchedPeer peer;
  if (!parseLaunchedPeer(argc, argv, &peer)) return 2;
  const Options& o = peer.options;
  ccl::init();
  std::shared_ptr<ccl::kvs> kvs;
  ccl::kvs::address_type address{};
  if (peer.rank == 0) {
    kvs = ccl::create_main_kvs();
    address = kvs->get_address();
    if (!publishAddress(peer.storeDir, address)) {
      std::fprintf(stderr, "ccl_perf: cannot write the store address into %s\n", peer.storeDir);
      return 1;
    }
  } else {
    if (!readAddress(peer.storeDir, &address)) {
      std::fprintf(stderr, "ccl_perf: rank %d: no store address in %s after 60 s\n", peer.rank, peer.storeDir);
      return 1;
    }
    kvs = ccl::create_kvs(address);
  }
  ccl::communicator comm = ccl::create_communicator(peer.size, peer.rank, kvs);
  HostBuffer send(o.type, o.maxBytes, true), recv(o.type, o.maxBytes, false);
  const ccl::datatype type = o.type == DataType::Float32 ? ccl::datatype::float32 : ccl::datatype::bfloat16;
  // In place (-I 1) as NCCL spells it: one buffer, each rank's block at
  // its offset in the whole (allgather's input, reduce-scatter's output).
  char* const whole = static_cast<char*>(recv.data());
  const size_t es = elementSize(o.type);
  auto run = [&](size_t block) {
    char* mine = whole + static_cast<size_t>(peer.rank) * block * es;
    switch (o.collective) {
      case Collective::AllReduce:
        ccl::allreduce(o.inPlace ? whole : send.data(), whole, block, type, ccl::reduction::sum, comm).wait();
        break;
      case Collective::ReduceScatter:
        ccl::reduce_scatter(o.inPlace ? whole : send.data(), o.inPlace ? mine : whole, block, type,
                            ccl::reduction::sum, comm).wait();
        break;
      case Collective::AllGather:
        ccl::allgather(o.inPlace ? mine : send.data(), whole, block, type, comm).wait();
        break;
      case Collective::Broadcast:
        ccl::broadcast(send.data(), block, type, 0, comm).wait();
        break;
      case Collective::AllToAll:
        ccl::alltoall(o.inPlace ? whole : send.data(), whole, block, type, comm).wait();
        break;
    }
  };
  auto mean = [&](double x) {
    double sum = 0;
    ccl::allreduce(&x, &sum, 1, ccl::reduction::sum, comm).wait();
    return sum / peer.size;
  };
  sweep(o, "oneCCL", peer.rank, peer.size, run, [&] { ccl::barrier(comm); }, mean, nothingToFinish);
  return 0;
}
