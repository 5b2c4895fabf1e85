// fwPost: every operation described once, posted blocking and non-blocking,
// gives what its own call gives; descriptions no call takes are refused by
// name.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "tests/multirank/api_test_helpers.h"

namespace fairway::testing {
namespace {

// Posts args blocking, then non-blocking (and waits).
fwResult_t postBoth(const fwOpArgs_t& args, fwComm_t comm, int* failures) {
  const fwResult_t blocking = fwPost(&args, comm, nullptr, nullptr);
  fwRequest_t request = nullptr;
  fwResult_t posted = fwPost(&args, comm, nullptr, &request);
  if (posted == fwSuccess) posted = fwWait(request);
  if (blocking != posted) ++*failures;
  return blocking;
}

TEST(Post, EveryOperationBlockingAndNot) {
  runWithComm(3, false, [](const RankContext& ctx, fwComm_t comm) {
    int failures = 0;
    const int n = ctx.nranks, me = ctx.rank;
    const size_t k = 1000;
    std::vector<int32_t> in(k * n), out(k * n);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(me * 100000 + i);
    fwOpArgs_t a = FW_OP_ARGS_INITIALIZER;
    a.datatype = fwInt32;
    a.sendbuff = in.data();
    a.recvbuff = out.data();
    a.count = k;

    a.type = fwOpAllReduce;
    RANK_CHECK(ctx, postBoth(a, comm, &failures) == fwSuccess, "allreduce");
    RANK_CHECK(ctx, out[7] == (0 + 100000 + 200000) + 3 * 7, "allreduce result");
    a.type = fwOpReduceScatter;
    RANK_CHECK(ctx, postBoth(a, comm, &failures) == fwSuccess, "reducescatter");
    RANK_CHECK(ctx, out[0] == 300000 + 3 * static_cast<int32_t>(me * k), "reducescatter result");
    a.type = fwOpAllGather;
    RANK_CHECK(ctx, postBoth(a, comm, &failures) == fwSuccess, "allgather");
    RANK_CHECK(ctx, out[2 * k + 5] == 200005, "allgather result");
    std::vector<std::vector<int32_t>> blocks(n, std::vector<int32_t>(k));
    std::vector<void*> addresses;
    for (auto& b : blocks) addresses.push_back(b.data());
    a.recvbuffs = addresses.data();
    RANK_CHECK(ctx, postBoth(a, comm, &failures) == fwSuccess, "allgather list");
    RANK_CHECK(ctx, blocks[1][9] == 100009, "allgather list result");
    a.recvbuffs = nullptr;
    a.type = fwOpBroadcast;
    a.root = 1;
    RANK_CHECK(ctx, postBoth(a, comm, &failures) == fwSuccess, "broadcast");
    RANK_CHECK(ctx, out[3] == 100003, "broadcast result");
    a.type = fwOpAllToAll;
    RANK_CHECK(ctx, postBoth(a, comm, &failures) == fwSuccess, "alltoall");
    RANK_CHECK(ctx, out[2 * k] == static_cast<int32_t>(200000 + me * k), "alltoall result");
    std::vector<size_t> counts(n, k), displs(n);
    for (int r = 0; r < n; ++r) displs[r] = r * k;
    a.type = fwOpAllToAllv;
    a.sendcounts = a.recvcounts = counts.data();
    a.sdispls = a.rdispls = displs.data();
    RANK_CHECK(ctx, postBoth(a, comm, &failures) == fwSuccess, "alltoallv");
    RANK_CHECK(ctx, out[k] == static_cast<int32_t>(100000 + me * k), "alltoallv result");
    a.type = fwOpGather;
    a.root = 2;
    RANK_CHECK(ctx, postBoth(a, comm, &failures) == fwSuccess, "gather");
    if (me == 2) RANK_CHECK(ctx, out[k + 1] == 100001, "gather result");
    a.type = fwOpScatter;
    a.root = 0;
    RANK_CHECK(ctx, postBoth(a, comm, &failures) == fwSuccess, "scatter");
    RANK_CHECK(ctx, out[0] == static_cast<int32_t>(me * k), "scatter result");
    a.type = fwOpReduce;
    a.op = fwMax;
    RANK_CHECK(ctx, postBoth(a, comm, &failures) == fwSuccess, "reduce");
    if (me == 0) RANK_CHECK(ctx, out[4] == 200004, "reduce result");
    a.type = fwOpBarrier;
    RANK_CHECK(ctx, postBoth(a, comm, &failures) == fwSuccess, "barrier");
    // A ring of messages: receive from the left, send to the right.
    fwOpArgs_t recv = FW_OP_ARGS_INITIALIZER, send = FW_OP_ARGS_INITIALIZER;
    int source = -1;
    recv.type = fwOpRecv;
    recv.recvbuff = out.data();
    recv.count = k;
    recv.datatype = fwInt32;
    recv.peer = (me + n - 1) % n;
    recv.tag = 6;
    recv.source = &source;
    send.type = fwOpSend;
    send.sendbuff = in.data();
    send.count = k;
    send.datatype = fwInt32;
    send.peer = (me + 1) % n;
    send.tag = 6;
    fwRequest_t r1, r2;
    RANK_CHECK(ctx, fwPost(&recv, comm, nullptr, &r1) == fwSuccess, "post recv");
    RANK_CHECK(ctx, fwPost(&send, comm, nullptr, &r2) == fwSuccess, "post send");
    RANK_CHECK(ctx, fwWait(r1) == fwSuccess && fwWait(r2) == fwSuccess, "messages");
    RANK_CHECK(ctx, source == recv.peer && out[1] == recv.peer * 100000 + 1, "message result");
    // Compressed allreduce (fp16) of floats.
    std::vector<float> f(k, 1.5f);
    fwCompression_t half = FW_COMPRESSION_INITIALIZER;
    half.kind = fwCompressFp16;
    fwOpArgs_t c = FW_OP_ARGS_INITIALIZER;
    c.type = fwOpAllReduce;
    c.sendbuff = c.recvbuff = f.data();
    c.count = k;
    c.compression = &half;
    RANK_CHECK(ctx, fwPost(&c, comm, nullptr, nullptr) == fwSuccess && f[0] == 4.5f, "compressed");
    return failures;
  });
}

TEST(Post, DescriptionsNoCallTakesAreRefusedByName) {
  runWithComm(1, false, [](const RankContext& ctx, fwComm_t comm) {
    int failures = 0;
    auto says = [](const char* words) { return std::string(fwGetLastErrorMessage()).find(words) != std::string::npos; };
    int32_t x = 1, y = 0;
    fwOpArgs_t a = FW_OP_ARGS_INITIALIZER;
    a.sendbuff = &x;
    a.recvbuff = &y;
    a.count = 1;
    a.datatype = fwInt32;
    fwRequest_t request = reinterpret_cast<fwRequest_t>(0x1);
    RANK_CHECK(ctx, fwPost(nullptr, comm, nullptr, &request) == fwInvalidPointer && request == nullptr, "NULL args");
    fwOpArgs_t shortArgs = a;
    shortArgs.size = 8;
    RANK_CHECK(ctx, fwPost(&shortArgs, comm, nullptr, nullptr) == fwInvalidArgument && says("FW_OP_ARGS_INITIALIZER"),
               "short struct");
    fwOpArgs_t badType = a;
    badType.type = static_cast<fwOpType_t>(42);
    RANK_CHECK(ctx, fwPost(&badType, comm, nullptr, nullptr) == fwInvalidArgument && says("42"), "bad type");
    int fakeStream = 0;
    RANK_CHECK(ctx, fwPost(&a, comm, &fakeStream, &request) == fwInvalidUsage && says("a request and a stream"),
               "request and stream");
    void* blocks[1] = {&y};
    fwOpArgs_t list = a;
    list.type = fwOpBroadcast;
    list.recvbuffs = blocks;
    RANK_CHECK(ctx, fwPost(&list, comm, nullptr, nullptr) == fwInvalidUsage && says("list form"), "list on broadcast");
    fwCompression_t half = FW_COMPRESSION_INITIALIZER;
    half.kind = fwCompressFp16;
    fwOpArgs_t compressed = a;
    compressed.type = fwOpBroadcast;
    compressed.compression = &half;
    RANK_CHECK(ctx, fwPost(&compressed, comm, nullptr, nullptr) == fwInvalidUsage && says("compression applies"),
               "compressed broadcast");
    // The call's own checks stand: a bad count is the allreduce's error.
    fwOpArgs_t noBuffer = a;
    noBuffer.sendbuff = nullptr;
    RANK_CHECK(ctx, fwPost(&noBuffer, comm, nullptr, nullptr) == fwInvalidPointer && says("allreduce"),
               "the call's own check");
    RANK_CHECK(ctx, fwPost(&a, comm, nullptr, nullptr) == fwSuccess && y == 1, "a good one still runs");
    return failures;
  });
}

}  // namespace
}  // namespace fairway::testing
