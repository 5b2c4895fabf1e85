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
