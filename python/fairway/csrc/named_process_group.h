// A torch ProcessGroup that reports the name its backend was registered
// under. torch's own ProcessGroup names every out-of-tree backend "custom"
// (ProcessGroup::getBackendName maps the backend's type, and all plugins
// share the CUSTOM type), and DDP's logging data and torch's error
// messages read that name. A creator that returns a ProcessGroup instead
// of a Backend gets it used as the group itself, so fairway.torch returns
// this one, holding the FairwayBackend for each device.
#pragma once

#include <string>
#include <utility>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

namespace fairway_torch {

class NamedProcessGroup : public c10d::ProcessGroup {
 public:
  NamedProcessGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::string name)
      : c10d::ProcessGroup(store, rank, size), name_(std::move(name)) {}

  const std::string getBackendName() const override { return name_; }

 private:
  std::string name_;
};

}  // namespace fairway_torch
