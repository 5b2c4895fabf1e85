// Gloo's collectives (allreduce, ReduceScatterHalvingDoubling, allgather,
// broadcast from rank 0, alltoall)
// over its TCP transport on the sweep and columns of Fairway's perf
// binaries, for scripts/compare.sh. Rank and size come from the launcher's
// variables (fairwayrun's, torchrun's, Open MPI's or Slurm's); the ranks
// meet through a Gloo FileStore in PEER_STORE_DIR.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <memory>
#include <vector>

#include "perf/compare/peer_sweep.h"

using namespace fairway::peer;

namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

}  // namespace

int main(int argc, char** argv) {
  LaunchedPeer peer;
  if (!parseLaunchedPeer(argc, argv, &peer)) return 2;
  const Options& o = peer.options;
  const int rank = peer.rank, nranks = peer.size;
  if (o.type != DataType::Float32) {
    // Gloo's reductions come for float, double, half and integers, not bfloat16.
    if (rank == 0) std::fprintf(stderr, "gloo_perf: -d %s: Gloo has no such type\n", typeName(o.type));
    return 2;
  }
  if (o.inPlace) {
    if (rank == 0) std::fprintf(stderr, "gloo_perf: -I 1: Gloo is compared out of place only\n");
    return 2;
  }
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(peer.storeDir);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
  context->connectFullMesh(store, device);

  std::vector<float> send(o.maxBytes / sizeof(float) + 1, 1.0f), recv(o.maxBytes / sizeof(float) + 1, 0.0f);
  // The reduce-scatter is an algorithm object bound to its buffer and
  // sizes: built (a collective step) at the first call of each size.
  std::unique_ptr<gloo::ReduceScatterHalvingDoubling<float>> reduceScatter;
  size_t reduceScatterBlock = 0;
  auto run = [&](size_t block) {
    switch (o.collective) {
      case Collective::AllReduce: {
        gloo::AllreduceOptions opts(context);
        opts.setInput(send.data(), block);
        opts.setOutput(recv.data(), block);
        opts.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
        gloo::allreduce(opts);
        break;
      }
      case Collective::ReduceScatter: {
        if (!reduceScatter || reduceScatterBlock != block) {
          reduceScatter = std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(
              context, std::vector<float*>{send.data()}, static_cast<int>(block * nranks),
              std::vector<int>(nranks, static_cast<int>(block)));
          reduceScatterBlock = block;
        }
        reduceScatter->run();
        break;
      }
      case Collective::AllGather: {
        gloo::AllgatherOptions opts(context);
        opts.setInput(send.data(), block);
        opts.setOutput(recv.data(), block * nranks);
        gloo::allgather(opts);
        break;
      }
      case Collective::Broadcast: {
        // The root sends its output buffer when it is given no input.
        gloo::BroadcastOptions opts(context);
        opts.setOutput(send.data(), block);
        opts.setRoot(0);
        gloo::broadcast(opts);
        break;
      }
      case Collective::AllToAll: {
        gloo::AlltoallOptions opts(context);
        opts.setInput(send.data(), block * nranks);
        opts.setOutput(recv.data(), block * nranks);
        gloo::alltoall(opts);
        break;
      }
    }
  };
  auto barrier = [&] {
    gloo::BarrierOptions opts(context);
    gloo::barrier(opts);
  };
  auto mean = [&](double x) {
    double sum = 0;
    gloo::AllreduceOptions opts(context);
    opts.setInput(&x, 1);
    opts.setOutput(&sum, 1);
    opts.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<double>));
    gloo::allreduce(opts);
    return sum / nranks;
  };
  sweep(o, "Gloo", rank, nranks, run, barrier, mean, nothingToFinish);
  return 0;
}
