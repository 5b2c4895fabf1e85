// A thin C++ layer over fairway.h: a move-only Communicator that destroys
// itself, typed collectives, and an exception for failed calls.
#ifndef FAIRWAY_FAIRWAY_HPP_
#define FAIRWAY_FAIRWAY_HPP_

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "fairway/fairway.h"

namespace fairway {

class Error : public std::runtime_error {
 public:
  Error(fwResult_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  fwResult_t code() const { return code_; }

 private:
  fwResult_t code_;
};

inline void check(fwResult_t result) {
  if (result != fwSuccess) {
    throw Error(result, std::string(fwGetErrorString(result)) + ": " + fwGetLastErrorMessage());
  }
}

template <typename T> struct DataTypeOf;
template <> struct DataTypeOf<int8_t> { static constexpr fwDataType_t value = fwInt8; };
template <> struct DataTypeOf<uint8_t> { static constexpr fwDataType_t value = fwUint8; };
template <> struct DataTypeOf<int32_t> { static constexpr fwDataType_t value = fwInt32; };
template <> struct DataTypeOf<uint32_t> { static constexpr fwDataType_t value = fwUint32; };
template <> struct DataTypeOf<int64_t> { static constexpr fwDataType_t value = fwInt64; };
template <> struct DataTypeOf<uint64_t> { static constexpr fwDataType_t value = fwUint64; };
template <> struct DataTypeOf<float> { static constexpr fwDataType_t value = fwFloat32; };
template <> struct DataTypeOf<double> { static constexpr fwDataType_t value = fwFloat64; };

class Communicator {
 public:
  // Rank 0 calls this and passes the id to every rank out of band.
  static fwUniqueId newUniqueId() {
    fwUniqueId id;
    check(fwGetUniqueId(&id));
    return id;
  }
  static Communicator fromUniqueId(const fwUniqueId& id, int nranks, int rank) {
    fwComm_t comm = nullptr;
    check(fwCommInitRank(&comm, nranks, id, rank));
    return Communicator(comm);
  }
  // Rank, size and root from fairwayrun, torchrun, mpirun or srun.
  static Communicator fromEnvironment() {
    fwComm_t comm = nullptr;
    check(fwCommInitFromEnv(&comm));
    return Communicator(comm);
  }

  Communicator(Communicator&& other) noexcept : comm_(std::exchange(other.comm_, nullptr)) {}
  Communicator& operator=(Communicator&& other) noexcept {
    if (this != &other) {
      reset();
      comm_ = std::exchange(other.comm_, nullptr);
    }
    return *this;
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator() { reset(); }

  int rank() const {
    int r = 0;
    check(fwCommUserRank(comm_, &r));
    return r;
  }
  int size() const {
    int n = 0;
    check(fwCommCount(comm_, &n));
    return n;
  }
  fwComm_t handle() const { return comm_; }

  // An empty Communicator (handle() == nullptr) for FAIRWAY_SPLIT_NOCOLOR.
  Communicator split(int color, int key) const {
    fwComm_t child = nullptr;
    check(fwCommSplit(comm_, color, key, &child));
    return Communicator(child);
  }

  template <typename T>
  void allReduce(const T* send, T* recv, size_t count, fwRedOp_t op) {
    check(fwAllReduce(send, recv, count, DataTypeOf<T>::value, op, comm_, nullptr));
  }
  template <typename T>
  void reduceScatter(const T* send, T* recv, size_t recvcount, fwRedOp_t op) {
    check(fwReduceScatter(send, recv, recvcount, DataTypeOf<T>::value, op, comm_, nullptr));
  }
  template <typename T>
  void allGather(const T* send, T* recv, size_t sendcount) {
    check(fwAllGather(send, recv, sendcount, DataTypeOf<T>::value, comm_, nullptr));
  }
  template <typename T>
  void broadcast(const T* send, T* recv, size_t count, int root) {
    check(fwBroadcast(send, recv, count, DataTypeOf<T>::value, root, comm_, nullptr));
  }
  template <typename T>
  void reduce(const T* send, T* recv, size_t count, fwRedOp_t op, int root) {
    check(fwReduce(send, recv, count, DataTypeOf<T>::value, op, root, comm_, nullptr));
  }
  template <typename T>
  void allToAll(const T* send, T* recv, size_t count) {
    check(fwAllToAll(send, recv, count, DataTypeOf<T>::value, comm_, nullptr));
  }
  template <typename T>
  void send(const T* buf, size_t count, int peer) {
    check(fwSend(buf, count, DataTypeOf<T>::value, peer, comm_, nullptr));
  }
  template <typename T>
  void recv(T* buf, size_t count, int peer) {
    check(fwRecv(buf, count, DataTypeOf<T>::value, peer, comm_, nullptr));
  }
  void barrier() { check(fwBarrier(comm_, nullptr)); }

 private:
  explicit Communicator(fwComm_t comm) : comm_(comm) {}
  // Destruction cannot throw; a failure here was already reported by the
  // peers' own calls.
  void reset() {
    if (comm_ != nullptr) fwCommDestroy(comm_);
    comm_ = nullptr;
  }
  fwComm_t comm_ = nullptr;
};

}  // namespace fairway

#endif  // FAIRWAY_FAIRWAY_HPP_
