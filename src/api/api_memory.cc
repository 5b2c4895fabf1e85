// Memory for communication buffers. Device memory from the device runtime
// the communicators use (FAIRWAY_DEVICE_RUNTIME): cudaMalloc on the calling
// thread's current device with CUDA, the runtime's own arena under the
// host-emulated runtime of the tests. Host memory the node's peers can map
// (providers/shm/mappable_memory.h).
#include "api/device_runtime_access.h"
#include "comm/local_machine.h"
#include "core/errors.h"
#include "providers/shm/mappable_memory.h"

using namespace fairway;

namespace {

Status deviceRuntime(const char* call, DeviceRuntime** out) {
  Config config;
  FW_RETURN_IF_ERROR(Config::fromEnvironment(&config).withContext(call));
  LocalMachine* machine = nullptr;
  FW_RETURN_IF_ERROR(LocalMachine::get(config, &machine).withContext(call));
  if (!machine->device) {
    return Status(fwNotAvailable, std::string(call) + ": no device runtime: " + machine->cudaDevice.reason);
  }
  *out = machine->device.get();
  return Status::ok();
}

}  // namespace

extern "C" {

fwResult_t fwMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return reportToCaller(Status(fwInvalidPointer, "fwMemAlloc: ptr is NULL"));
  *ptr = nullptr;
  DeviceRuntime* device = nullptr;
  Status st = deviceRuntime("fwMemAlloc", &device);
  if (st.isOk()) st = device->allocateDevice(size, ptr).withContext("fwMemAlloc of " + std::to_string(size) + " bytes");
  return reportToCaller(st);
}

fwResult_t fwMemFree(void* ptr) {
  if (ptr == nullptr) return reportToCaller(Status::ok());
  DeviceRuntime* device = nullptr;
  Status st = deviceRuntime("fwMemFree", &device);
  int owner = 0;
  if (st.isOk() && device->memoryTypeOf(ptr, &owner) != MemoryType::Cuda) {
    st = Status(fwInvalidArgument, "fwMemFree: the pointer is not device memory (not from fwMemAlloc)");
  }
  if (st.isOk()) device->freeDevice(ptr);
  return reportToCaller(st);
}

fwResult_t fwHostMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return reportToCaller(Status(fwInvalidPointer, "fwHostMemAlloc: ptr is NULL"));
  return reportToCaller(allocateMappable(size, ptr).withContext("fwHostMemAlloc"));
}

fwResult_t fwHostMemFree(void* ptr) {
  if (ptr == nullptr) return reportToCaller(Status::ok());
  return reportToCaller(freeMappable(ptr).withContext("fwHostMemFree"));
}

fairway::DeviceRuntime* fairwayProcessDeviceRuntime(const char** why) {
  static thread_local std::string reason;
  DeviceRuntime* device = nullptr;
  Status st = deviceRuntime("fairwayProcessDeviceRuntime", &device);
  reason = st.message();
  if (why != nullptr) *why = st.isOk() ? "" : reason.c_str();
  return device;
}

}  // extern "C"
