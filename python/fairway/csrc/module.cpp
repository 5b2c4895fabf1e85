// The Python side of the backend: torch.distributed's creator calls
// FairwayBackend(store, rank, size, timeout_ms, name, deferred) (deferred:
// enable_reconfigure, formed by reconfigure); new_group on a group bound
// to a device splits through split_for_group / perform_nocolor_split.
#include <algorithm>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "fairway_backend.h"
#include "named_process_group.h"

namespace py = pybind11;
using fairway_torch::FairwayBackend;
using fairway_torch::NamedProcessGroup;

namespace {

// A direct call's result: its Work when asynchronous; nothing (None) when
// the call has completed, which saves Python a Work object per call.
c10::intrusive_ptr<c10d::Work> asyncResult(c10::intrusive_ptr<c10d::Work> work, bool asyncOp) {
  return asyncOp ? std::move(work) : c10::intrusive_ptr<c10d::Work>();
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "Fairway collectives as a torch.distributed backend";
  py::module_::import("torch.distributed");  // registers c10d::Backend with pybind first
  py::class_<FairwayBackend, c10d::Backend, c10::intrusive_ptr<FairwayBackend>>(m, "FairwayBackend")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, int64_t timeoutMs,
                       const std::string& name, bool deferred) {
             const std::chrono::milliseconds timeout(timeoutMs);
             if (deferred) {
               return c10::make_intrusive<FairwayBackend>(FairwayBackend::Deferred{}, store, rank, size, timeout,
                                                          name);
             }
             return c10::make_intrusive<FairwayBackend>(store, rank, size, timeout, name);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_ms"), py::arg("name") = "fairway",
           py::arg("deferred") = false, py::call_guard<py::gil_scoped_release>())
      .def("split_for_group",
           [](FairwayBackend& self, int color, int key, int size, int64_t timeoutMs,
              const c10::intrusive_ptr<c10d::Store>& store) {
             return self.splitForGroup(color, key, size, std::chrono::milliseconds(timeoutMs), store);
           },
           py::arg("color"), py::arg("key"), py::arg("size"), py::arg("timeout_ms"), py::arg("store"),
           py::call_guard<py::gil_scoped_release>())
      .def("perform_nocolor_split", [](FairwayBackend& self, py::object) { self.performNocolorSplit(); },
           py::arg("device") = py::none())
      .def("comm_handle", [](FairwayBackend& self) { return reinterpret_cast<uintptr_t>(self.comm()); })
      // fwCommGetFailedRanks: the group ranks this process knows to have failed, ascending.
      .def("failed_ranks",
           [](FairwayBackend& self) {
             std::vector<int> ranks;
             int count = 0;
             if (self.comm() != nullptr && fwCommGetFailedRanks(self.comm(), nullptr, 0, &count) == fwSuccess) {
               ranks.resize(count);
               if (fwCommGetFailedRanks(self.comm(), ranks.data(), count, &count) != fwSuccess) ranks.clear();
               ranks.resize(std::min<size_t>(ranks.size(), count));
             }
             return ranks;
           })
      // fairway.torch.collective's direct calls on CPU tensors: the
      // backend's own operation without torch's Python wrapper, dispatcher
      // and per-call hooks (docs/pytorch.md, "Small calls"). A Work with
      // async_op, None without (the call has completed).
      .def("direct_all_reduce",
           [](FairwayBackend& self, at::Tensor tensor, const c10d::ReduceOp& op, bool asyncOp) {
             std::vector<at::Tensor> tensors{std::move(tensor)};
             c10d::AllreduceOptions opts;
             opts.reduceOp = op;
             opts.asyncOp = asyncOp;
             return asyncResult(self.allreduce(tensors, opts), asyncOp);
           },
           py::call_guard<py::gil_scoped_release>())
      .def("direct_broadcast",
           [](FairwayBackend& self, at::Tensor tensor, int64_t root, bool asyncOp) {
             std::vector<at::Tensor> tensors{std::move(tensor)};
             c10d::BroadcastOptions opts;
             opts.rootRank = root;
             opts.asyncOp = asyncOp;
             return asyncResult(self.broadcast(tensors, opts), asyncOp);
           },
           py::call_guard<py::gil_scoped_release>())
      .def("direct_all_gather",
           [](FairwayBackend& self, at::Tensor output, at::Tensor input, bool asyncOp) {
             c10d::AllgatherOptions opts;
             opts.asyncOp = asyncOp;
             return asyncResult(self.all_gather_single(output, input, opts), asyncOp);
           },
           py::call_guard<py::gil_scoped_release>())
      .def("direct_reduce_scatter",
           [](FairwayBackend& self, at::Tensor output, at::Tensor input, const c10d::ReduceOp& op, bool asyncOp) {
             c10d::ReduceScatterOptions opts;
             opts.reduceOp = op;
             opts.asyncOp = asyncOp;
             return asyncResult(self.reduce_scatter_single(output, input, opts), asyncOp);
           },
           py::call_guard<py::gil_scoped_release>())
      .def("allreduce_compressed",
           [](FairwayBackend& self, at::Tensor tensor, int kind, int blockSize, std::optional<at::Tensor> residual,
              bool average, bool asyncOp) {
             return self.allreduceCompressed(tensor, static_cast<fwCompressKind_t>(kind), blockSize,
                                             residual.value_or(at::Tensor()), average, asyncOp);
           },
           py::arg("tensor"), py::arg("kind"), py::arg("block_size"), py::arg("residual"), py::arg("average"),
           py::arg("async_op"), py::call_guard<py::gil_scoped_release>())
      .def("reduce_scatter_compressed",
           [](FairwayBackend& self, at::Tensor output, at::Tensor input, int kind, int blockSize,
              std::optional<at::Tensor> residual, bool average, bool asyncOp) {
             return self.reduceScatterCompressed(output, input, static_cast<fwCompressKind_t>(kind), blockSize,
                                                 residual.value_or(at::Tensor()), average, asyncOp);
           },
           py::arg("output"), py::arg("input"), py::arg("kind"), py::arg("block_size"), py::arg("residual"),
           py::arg("average"), py::arg("async_op"), py::call_guard<py::gil_scoped_release>());
  // The group torch keeps for a plain "fairway" backend; the store, rank and
  // size are those of the group torch made and passes to the creator.
  py::class_<NamedProcessGroup, c10d::ProcessGroup, c10::intrusive_ptr<NamedProcessGroup>>(m, "NamedProcessGroup")
      .def(py::init([](const c10::intrusive_ptr<c10d::ProcessGroup>& madeByTorch, int rank, int size,
                       const std::string& name) {
             return c10::make_intrusive<NamedProcessGroup>(madeByTorch->getStore(), rank, size, name);
           }),
           py::arg("made_by_torch"), py::arg("rank"), py::arg("size"), py::arg("name"));
  m.def("version", [] {
    int version = 0;
    fwGetVersion(&version);
    return version;
  });
  m.def("nocolor", [] { return FAIRWAY_SPLIT_NOCOLOR; });
  // A CPU tensor in fwHostMemAlloc memory (zeroed), freed with the tensor.
  m.def(
      "mappable_empty",
      [](std::vector<int64_t> sizes, at::ScalarType type) {
        int64_t elements = 1;
        for (int64_t s : sizes) {
          if (s < 0) throw py::value_error("fairway: a tensor size is negative");
          elements *= s;
        }
        const size_t bytes = std::max<size_t>(static_cast<size_t>(elements) * c10::elementSize(type), 1);
        void* p = nullptr;
        if (fwHostMemAlloc(&p, bytes) != fwSuccess) {
          throw std::runtime_error(std::string("fairway: fwHostMemAlloc: ") + fwGetLastErrorMessage());
        }
        return at::from_blob(p, sizes, [](void* q) { (void)fwHostMemFree(q); },
                             at::TensorOptions().dtype(type).device(at::kCPU));
      },
      py::arg("sizes"), py::arg("dtype"));
  // The wire formats of fairway.h's fwCompressKind_t, by the names the C API's docs use.
  m.def("compression_kinds", [] {
    py::dict kinds;
    kinds["none"] = static_cast<int>(fwCompressNone);
    kinds["fp16"] = static_cast<int>(fwCompressFp16);
    kinds["bf16"] = static_cast<int>(fwCompressBf16);
    kinds["int8"] = static_cast<int>(fwCompressInt8);
    kinds["int4"] = static_cast<int>(fwCompressInt4);
    return kinds;
  });
}
