#include "perf/perf_memory.h"

#include <cstdlib>
#include <cstring>

#ifdef FAIRWAY_PERF_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fairway::perf {
namespace {

int localRank() {
  for (const char* name : {"FAIRWAY_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return 0;
}

}  // namespace

#ifdef FAIRWAY_PERF_CUDA

bool selectDevice(std::string* why) {
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    *why = e != cudaSuccess ? std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e) : "no CUDA device";
    return false;
  }
  e = cudaSetDevice(localRank() % devices);
  if (e != cudaSuccess) *why = std::string("cudaSetDevice: ") + cudaGetErrorString(e);
  return e == cudaSuccess;
}

// Host buffers are written once, so first-touch page faults stay out of
// the timings.
void* allocateHost(size_t bytes) {
  void* p = std::malloc(bytes);
  if (p != nullptr) std::memset(p, 0, bytes);
  return p;
}

void* allocate(Memory memory, size_t bytes) {
  if (memory == Memory::Host) return allocateHost(bytes);
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
  if (cudaMemset(p, 0, bytes) != cudaSuccess) {
    cudaFree(p);
    return nullptr;
  }
  return p;
}

void release(Memory memory, void* buffer) {
  if (memory == Memory::Host) std::free(buffer);
  else if (buffer != nullptr) cudaFree(buffer);
}

bool copyToBuffer(Memory memory, void* dst, const void* src, size_t bytes) {
  if (memory == Memory::Host) return std::memmove(dst, src, bytes) != nullptr;
  return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
}

bool copyFromBuffer(Memory memory, void* dst, const void* src, size_t bytes) {
  if (memory == Memory::Host) return std::memmove(dst, src, bytes) != nullptr;
  return cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
}

bool synchronize(Memory memory) { return memory == Memory::Host || cudaDeviceSynchronize() == cudaSuccess; }

#else  // built without the CUDA toolkit: host memory only

bool selectDevice(std::string* why) {
  *why = "this build has no CUDA support (the toolkit was not found when it was configured)";
  return false;
}
void* allocateHost(size_t bytes) {
  void* p = std::malloc(bytes);
  if (p != nullptr) std::memset(p, 0, bytes);
  return p;
}
void* allocate(Memory memory, size_t bytes) { return memory == Memory::Host ? allocateHost(bytes) : nullptr; }
void release(Memory, void* buffer) { std::free(buffer); }
bool copyToBuffer(Memory, void* dst, const void* src, size_t bytes) { return std::memmove(dst, src, bytes) != nullptr; }
bool copyFromBuffer(Memory, void* dst, const void* src, size_t bytes) { return std::memmove(dst, src, bytes) != nullptr; }
bool synchronize(Memory) { return true; }

#endif

}  // namespace fairway::perf
