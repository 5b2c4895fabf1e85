// sendrecv_perf: nccl-tests' send/receive benchmark over Fairway. Every rank
// sends count elements to rank + 1 and receives as many from rank - 1 (a
// ring), both posted before either is waited for. Device buffers (-m cuda)
// take the calls on a stream, which run in call order and block until
// matched, like NCCL's outside a group: even ranks send first, odd ranks
// receive first, so the ring always moves; one rank cannot message itself
// that way and is refused. No in-place form: a buffer that is being sent
// is not also received into.
#include "perf/check_data.h"
#include "perf/perf_common.h"

using namespace fairway;
using namespace fairway::perf;

namespace {

fwResult_t sendRecvOnDevice(const PerfBuffers& b, int next, int prev) {
  const bool sendFirst = b.rank % 2 == 0;
  for (int turn = 0; turn < 2; ++turn) {
    fwResult_t r = (turn == 0) == sendFirst ? fwSend(b.send, b.count, b.datatype, next, b.comm, nullptr)
                                            : fwRecv(b.recv, b.count, b.datatype, prev, b.comm, nullptr);
    if (r != fwSuccess) return r;
  }
  return fwSuccess;
}

fwResult_t sendRecv(const PerfBuffers& b) {
  const int next = (b.rank + 1) % b.nranks, prev = (b.rank + b.nranks - 1) % b.nranks;
  if (b.onDevice) return sendRecvOnDevice(b, next, prev);
  fwRequest_t recv = nullptr, send = nullptr;
  fwResult_t r = fwIrecv(b.recv, b.count, b.datatype, prev, b.comm, &recv);
  if (r != fwSuccess) return r;
  r = fwIsend(b.send, b.count, b.datatype, next, b.comm, &send);
  if (r != fwSuccess) {
    (void)fwWait(recv);
    return r;
  }
  fwResult_t sent = fwWait(send);
  fwResult_t received = fwWait(recv);
  return sent != fwSuccess ? sent : received;
}

const PerfCollective kSendRecv{
    "sendrecv_perf",
    /*usesOp=*/false,
    /*usesRoot=*/false,
    [](size_t count, int) { return count; },
    [](size_t count, int) { return count; },
    [](int) { return 1.0; },
    nullptr,
    nullptr,
    sendRecv,
    [](const PerfBuffers& b, int seed) { check::fill(b.send, b.datatype, fwSum, b.rank, 0, b.count, seed); },
    [](const PerfBuffers& b, void* expected, int seed) {
      check::fill(expected, b.datatype, fwSum, (b.rank + b.nranks - 1) % b.nranks, 0, b.count, seed);
      return b.count;
    },
    /*compresses=*/false,
    /*minRanksOnDevice=*/2,
    "device messages block until matched, and a rank cannot both send to and receive from itself that way",
};

}  // namespace

int main(int argc, char** argv) { return runPerf(argc, argv, kSendRecv); }
