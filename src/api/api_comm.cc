// C entry points that create, split, query and destroy communicators.
#include <cstddef>
#include <memory>

#include "api/handles.h"
#include "bootstrap/root.h"
#include "comm/communicator_factory.h"
#include "core/errors.h"
#include "core/log.h"
#include "p2p/tags.h"

using namespace fairway;

namespace {

// create fills impl; on success the new communicator gets a handle.
template <typename Create>
Status createAndRegister(Create create, fwComm_t* comm) {
  std::unique_ptr<Communicator> impl;
  FW_RETURN_IF_ERROR(create(&impl));
  *comm = registerComm(std::move(impl));
  return Status::ok();
}

Status checkRankAndSize(int rank, int nranks) {
  if (nranks < 1 || static_cast<uint64_t>(nranks) > kMaxTagRanks) {
    return Status(fwInvalidArgument, "nranks " + std::to_string(nranks) + " is not in [1, " +
                                         std::to_string(kMaxTagRanks) + "]");
  }
  if (rank < 0 || rank >= nranks) {
    return Status(fwInvalidRank, "rank " + std::to_string(rank) + " is not in [0, " + std::to_string(nranks) + ")");
  }
  return Status::ok();
}

}  // namespace

extern "C" {

fwResult_t fwGetUniqueId(fwUniqueId* uniqueId) {
  if (uniqueId == nullptr) return reportToCaller(Status(fwInvalidPointer, "uniqueId is NULL"));
  Config config;
  Status st = Config::fromEnvironment(&config);
  SocketAddress listenAddress;
  if (st.isOk()) st = findInterfaceAddress(config.socketIfname, &listenAddress);
  BootstrapId id;
  if (st.isOk()) st = randomSecret(id.secret);
  if (st.isOk()) st = startBootstrapRoot(listenAddress, id.secret, config.timeoutMs, &id);
  if (st.isOk()) encodeUniqueId(id, uniqueId);
  return reportToCaller(st.withContext("fwGetUniqueId"));
}

fwResult_t fwReleaseUniqueId(fwUniqueId uniqueId) {
  BootstrapId id;
  Status st = decodeUniqueId(uniqueId, &id);
  if (st.isOk()) st = stopBootstrapRoot(id);
  return reportToCaller(st.withContext("fwReleaseUniqueId"));
}

namespace {

// The caller's settings over the environment's; refuses what it cannot read.
Status applyUserConfig(const fwConfig_t* user, Config* config) {
  if (user == nullptr) return Status::ok();
  if (user->size < offsetof(fwConfig_t, timeoutMs) + sizeof(user->timeoutMs) || user->size > (1u << 16)) {
    return Status(fwInvalidArgument, "config.size is " + std::to_string(user->size) +
                                         ": start from FW_CONFIG_INITIALIZER");
  }
  if (user->timeoutMs < 0) {
    return Status(fwInvalidArgument, "config.timeoutMs is " + std::to_string(user->timeoutMs) +
                                         ": give milliseconds, or 0 for FAIRWAY_TIMEOUT_MS");
  }
  if (user->timeoutMs > 0) config->timeoutMs = user->timeoutMs;
  return Status::ok();
}

Status initRank(fwComm_t* comm, int nranks, fwUniqueId commId, int rank, const fwConfig_t* user) {
  *comm = nullptr;
  Status st = checkRankAndSize(rank, nranks);
  BootstrapId id;
  if (st.isOk()) st = decodeUniqueId(commId, &id);
  Config config;
  if (st.isOk()) st = Config::fromEnvironment(&config);
  if (st.isOk()) st = applyUserConfig(user, &config);
  if (st.isOk()) {
    st = createAndRegister([&](std::unique_ptr<Communicator>* out) {
      return createFromBootstrap(id, rank, nranks, config, BootstrapRole::init(), out);
    }, comm);
  }
  return st;
}

}  // namespace

fwResult_t fwCommInitRank(fwComm_t* comm, int nranks, fwUniqueId commId, int rank) {
  if (comm == nullptr) return reportToCaller(Status(fwInvalidPointer, "fwCommInitRank: comm is NULL"));
  return reportToCaller(initRank(comm, nranks, commId, rank, nullptr).withContext("fwCommInitRank"));
}

fwResult_t fwCommInitRankConfig(fwComm_t* comm, int nranks, fwUniqueId commId, int rank, const fwConfig_t* config) {
  if (comm == nullptr) return reportToCaller(Status(fwInvalidPointer, "fwCommInitRankConfig: comm is NULL"));
  if (config == nullptr) {
    *comm = nullptr;
    return reportToCaller(Status(fwInvalidPointer, "fwCommInitRankConfig: config is NULL"));
  }
  return reportToCaller(initRank(comm, nranks, commId, rank, config).withContext("fwCommInitRankConfig"));
}

fwResult_t fwCommInitFromEnv(fwComm_t* comm) {
  if (comm == nullptr) return reportToCaller(Status(fwInvalidPointer, "fwCommInitFromEnv: comm is NULL"));
  *comm = nullptr;
  Config config;
  Status st = Config::fromEnvironment(&config);
  if (st.isOk()) {
    st = createAndRegister([&](std::unique_ptr<Communicator>* out) { return createFromLauncher(config, out); }, comm);
  }
  return reportToCaller(st.withContext("fwCommInitFromEnv"));
}

fwResult_t fwCommGrow(fwComm_t comm, int nranks, fwUniqueId growId, int rank, fwComm_t* newcomm) {
  if (newcomm == nullptr) return reportToCaller(Status(fwInvalidPointer, "fwCommGrow: newcomm is NULL"));
  *newcomm = nullptr;
  Communicator* member = nullptr;
  Status st = comm == nullptr ? Status::ok() : lookupComm(comm, &member);
  if (st.isOk() && member != nullptr && rank != FAIRWAY_GROW_MEMBER) {
    st = Status(fwInvalidArgument, "rank " + std::to_string(rank) +
                                       " with a communicator: its members keep their ranks, pass FAIRWAY_GROW_MEMBER");
  }
  if (st.isOk() && member != nullptr && nranks <= member->size()) {
    st = Status(fwInvalidArgument, "nranks " + std::to_string(nranks) + " does not grow a communicator of " +
                                       std::to_string(member->size()) + " ranks");
  }
  if (st.isOk() && member == nullptr && rank == FAIRWAY_GROW_MEMBER) {
    st = Status(fwInvalidArgument, "FAIRWAY_GROW_MEMBER without a communicator: a joining process passes its rank");
  }
  const int newRank = member != nullptr ? member->rank() : rank;
  if (st.isOk()) st = checkRankAndSize(newRank, nranks);
  BootstrapId id;
  if (st.isOk()) st = decodeUniqueId(growId, &id);
  Config config;
  if (st.isOk() && member != nullptr) config = member->config();
  if (st.isOk() && member == nullptr) st = Config::fromEnvironment(&config);
  if (st.isOk()) {
    const BootstrapRole role = member != nullptr ? BootstrapRole::member(member->size()) : BootstrapRole::joiner();
    st = createAndRegister([&](std::unique_ptr<Communicator>* out) {
      return createFromBootstrap(id, newRank, nranks, config, role, out);
    }, newcomm);
  }
  return reportToCaller(st.withContext("fwCommGrow"));
}

fwResult_t fwCommSplit(fwComm_t comm, int color, int key, fwComm_t* newcomm) {
  if (newcomm == nullptr) return reportToCaller(Status(fwInvalidPointer, "fwCommSplit: newcomm is NULL"));
  *newcomm = nullptr;
  Communicator* impl = nullptr;
  Status st = lookupComm(comm, &impl);
  if (st.isOk() && color < 0 && color != FAIRWAY_SPLIT_NOCOLOR) {
    st = Status(fwInvalidArgument, "color " + std::to_string(color) + " is negative but not FAIRWAY_SPLIT_NOCOLOR");
  }
  std::unique_ptr<Communicator> child;
  if (st.isOk()) st = impl->split(color, key, &child);
  if (st.isOk() && child) *newcomm = registerComm(std::move(child));
  return reportToCaller(st.withContext("fwCommSplit"));
}

fwResult_t fwCommDestroy(fwComm_t comm) {
  Communicator* impl = nullptr;
  Status st = lookupComm(comm, &impl);
  if (!st.isOk()) return reportToCaller(st.withContext("fwCommDestroy"));
  st = impl->destroy();
  unregisterComm(comm);
  return reportToCaller(st.withContext("fwCommDestroy"));
}

fwResult_t fwCommAbort(fwComm_t comm) {
  Communicator* impl = nullptr;
  Status st = lookupComm(comm, &impl);
  if (!st.isOk()) return reportToCaller(st.withContext("fwCommAbort"));
  impl->abort();
  unregisterComm(comm);
  return fwSuccess;
}

fwResult_t fwCommCount(const fwComm_t comm, int* count) {
  Communicator* impl = nullptr;
  Status st = lookupComm(comm, &impl);
  if (st.isOk() && count == nullptr) st = Status(fwInvalidPointer, "count is NULL");
  if (st.isOk()) *count = impl->size();
  return reportToCaller(st.withContext("fwCommCount"));
}

fwResult_t fwCommUserRank(const fwComm_t comm, int* rank) {
  Communicator* impl = nullptr;
  Status st = lookupComm(comm, &impl);
  if (st.isOk() && rank == nullptr) st = Status(fwInvalidPointer, "rank is NULL");
  if (st.isOk()) *rank = impl->rank();
  return reportToCaller(st.withContext("fwCommUserRank"));
}

fwResult_t fwCommGetAsyncError(fwComm_t comm, fwResult_t* asyncError) {
  Communicator* impl = nullptr;
  Status st = lookupComm(comm, &impl);
  if (st.isOk() && asyncError == nullptr) st = Status(fwInvalidPointer, "asyncError is NULL");
  if (st.isOk()) *asyncError = impl->asyncError().code();
  return reportToCaller(st.withContext("fwCommGetAsyncError"));
}

}  // extern "C"
