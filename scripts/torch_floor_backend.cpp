// Two yardsticks for scripts/bench_torch_small.py, compiled at run time
// against the torch and the Fairway being measured (not part of the
// package):
//  - "fairway_floor": a torch.distributed backend whose collectives do
//    nothing and return a Work that has completed. Calling it through
//    torch.distributed costs what torch itself costs per call (its Python
//    wrapper, the dispatcher, its per-call hooks): the floor under any
//    backend's time for the same call. scripts/bench_torch_job.py runs
//    whole steps on it (every form DDP, FSDP2, DeepSpeed and torch's
//    tensor-parallel layers call): the step's own work with no
//    communication, wrong sums and all.
//  - c_api_seconds: the same collective through Fairway's C API in a C++
//    loop on the same communicator and buffers, which is the library's
//    own time for the call.
#include <fairway/fairway.h>
#include <torch/extension.h>

#include <chrono>
#include <string>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace {

// Done on creation; its future (DDP's communication hooks wait on it)
// holds the call's tensors, as a real backend's does.
class CompletedWork : public c10d::Work {
 public:
  CompletedWork(c10d::OpType type, std::vector<at::Tensor> tensors)
      : c10d::Work(-1, type), future_(c10::make_intrusive<c10::ivalue::Future>(
                                  c10::ListType::create(c10::TensorType::get()))) {
    future_->markCompleted(c10::IValue(std::move(tensors)));
  }
  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds) override { return true; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

c10::intrusive_ptr<c10d::Work> done(c10d::OpType type, std::vector<at::Tensor> tensors = {}) {
  return c10::make_intrusive<CompletedWork>(type, std::move(tensors));
}

class FloorBackend : public c10d::Backend {
 public:
  FloorBackend(int rank, int size) : c10d::Backend(rank, size) {}
  const std::string getBackendName() const override { return "fairway_floor"; }
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions&) override {
    return done(c10d::OpType::ALLREDUCE, tensors);
  }
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>&, const c10d::BroadcastOptions&) override {
    return done(c10d::OpType::BROADCAST);
  }
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor&, at::Tensor&, const c10d::AllgatherOptions&) override {
    return done(c10d::OpType::_ALLGATHER_BASE);
  }
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor&, at::Tensor&,
                                                      const c10d::ReduceScatterOptions&) override {
    return done(c10d::OpType::_REDUCE_SCATTER_BASE);
  }
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>&,
                                                     const c10d::AllreduceCoalescedOptions&) override {
    return done(c10d::OpType::ALLREDUCE_COALESCED);
  }
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>&, const c10d::ReduceOptions&) override {
    return done(c10d::OpType::REDUCE);
  }
  // The list form carries torch's own exchanges of shapes and pickled
  // objects (DDP's parameter check, all_gather_object), which fail on
  // garbage: each rank is answered with this one's input, as if every rank
  // had sent the same. The tensor forms, which carry the data, do nothing.
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) override {
    for (size_t i = 0; i < outputs.size() && i < inputs.size(); ++i) {
      for (at::Tensor& out : outputs[i]) out.copy_(inputs[i]);
    }
    return done(c10d::OpType::ALLGATHER);
  }
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>&,
                                                     std::vector<at::Tensor>&,
                                                     const c10d::AllgatherOptions&) override {
    return done(c10d::OpType::ALLGATHER_COALESCED);
  }
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>&, std::vector<at::Tensor>&,
                                                                 const c10d::AllgatherOptions&) override {
    return done(c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED);
  }
  // Setting up sharded parameters (distribute_tensor) scatters them: the
  // root keeps its own piece, the others get zeros rather than garbage
  // (the step's arithmetic then runs on ordinary numbers).
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& options) override {
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (getRank() == options.rootRank && i < inputs.size() && static_cast<size_t>(getRank()) < inputs[i].size()) {
        outputs[i].copy_(inputs[i][getRank()]);
      } else {
        outputs[i].zero_();
      }
    }
    return done(c10d::OpType::SCATTER);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>&, std::vector<std::vector<at::Tensor>>&,
                                                const c10d::ReduceScatterOptions&) override {
    return done(c10d::OpType::REDUCE_SCATTER);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>&, std::vector<at::Tensor>&,
                                                                 const c10d::ReduceScatterOptions&) override {
    return done(c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED);
  }
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor&, at::Tensor&, std::vector<int64_t>&, std::vector<int64_t>&,
                                               const c10d::AllToAllOptions&) override {
    return done(c10d::OpType::ALLTOALL_BASE);
  }
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override {
    return done(c10d::OpType::BARRIER);
  }
};

c10::intrusive_ptr<c10d::Backend> makeFloor(const c10::intrusive_ptr<c10d::Store>&, int rank, int size) {
  return c10::make_intrusive<FloorBackend>(rank, size);
}

fwDataType_t typeOf(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return fwFloat32;
    case at::kBFloat16: return fwBfloat16;
    case at::kHalf: return fwFloat16;
    default: TORCH_CHECK(false, "c_api_seconds: float32, bfloat16 or float16 tensors only");
  }
}

// Seconds for `iterations` blocking calls of `kind` on the communicator
// whose handle is `comm` (FairwayBackend.comm_handle()).
double cApiSeconds(uint64_t comm, const std::string& kind, at::Tensor send, at::Tensor recv, int64_t iterations) {
  const auto handle = reinterpret_cast<fwComm_t>(comm);
  const fwDataType_t type = typeOf(send);
  fwResult_t (*call)(fwComm_t, const at::Tensor&, at::Tensor&, fwDataType_t);
  if (kind == "all_reduce") {
    call = [](fwComm_t c, const at::Tensor& s, at::Tensor& r, fwDataType_t t) {
      return fwAllReduce(s.data_ptr(), r.data_ptr(), s.numel(), t, fwSum, c, nullptr);
    };
  } else if (kind == "all_gather") {
    call = [](fwComm_t c, const at::Tensor& s, at::Tensor& r, fwDataType_t t) {
      return fwAllGather(s.data_ptr(), r.data_ptr(), s.numel(), t, c, nullptr);
    };
  } else if (kind == "reduce_scatter") {
    call = [](fwComm_t c, const at::Tensor& s, at::Tensor& r, fwDataType_t t) {
      return fwReduceScatter(s.data_ptr(), r.data_ptr(), r.numel(), t, fwSum, c, nullptr);
    };
  } else if (kind == "broadcast") {
    call = [](fwComm_t c, const at::Tensor& s, at::Tensor& r, fwDataType_t t) {
      return fwBroadcast(s.data_ptr(), r.data_ptr(), s.numel(), t, 0, c, nullptr);
    };
  } else {
    TORCH_CHECK(false, "c_api_seconds: no collective ", kind);
  }
  pybind11::gil_scoped_release released;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iterations; ++i) {
    const fwResult_t result = call(handle, send, recv, type);
    TORCH_CHECK(result == fwSuccess, "c_api_seconds: ", kind, ": ", fwGetLastErrorMessage());
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  pybind11::module_::import("torch.distributed");
  pybind11::class_<FloorBackend, c10d::Backend, c10::intrusive_ptr<FloorBackend>>(m, "FloorBackend");
  m.def("make_floor", &makeFloor);
  m.def("c_api_seconds", &cApiSeconds);
}
