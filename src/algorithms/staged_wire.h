// Messages of data the transport cannot reach: device memory, when UCX is
// not CUDA-aware. Set on a collective's context, a staged wire makes every
// message of the algorithm cross through a bounce buffer in memory the
// transport reaches (pinned host memory): a send copies its bytes there
// when it is posted; a receive lands there and is copied into place when
// the algorithm waits for it. Algorithms read a received buffer only after
// waiting for it and never write a buffer a send still reads, so they run
// unchanged, once per call, with their data, reductions and scratch in the
// data's own memory.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/data_space.h"
#include "core/status.h"
#include "p2p/message_port.h"

namespace fairway {

class StagedWire {
 public:
  virtual ~StagedWire() = default;

  // A bounce buffer of at least `bytes` the transport reaches, held until
  // released; bad input is not possible here, running out of memory is.
  virtual Status acquire(size_t bytes, char** out) = 0;
  virtual void release(char* buffer) = 0;

  // The message behind `pending` crosses through `bounce`; a receive's
  // bytes go to `landing` once it is waited for (null: a send).
  void track(const Pending* pending, char* bounce, void* landing, size_t bytes) {
    inFlight_.push_back({pending, bounce, landing, bytes});
  }
  // After a wait that completed list[0..count): the receives among them
  // are copied into place and their bounce buffers, and the sends', freed.
  Status settle(DataSpace& space, const Pending* list, size_t count);
  // At the end of a call: what is still tracked is released unread (the
  // call failed and its messages were cancelled). Messages still in flight
  // after a successful call are an algorithm's bug, reported as such.
  Status finish(bool succeeded);

 private:
  struct InFlight {
    const Pending* pending;
    char* bounce;
    void* landing;
    size_t bytes;
  };
  std::vector<InFlight> inFlight_;
};

}  // namespace fairway
