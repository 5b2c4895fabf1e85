#include "tests/multirank/test_device.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <mutex>

#include "api/device_runtime_access.h"

namespace fairway::testing {
namespace {

constexpr int64_t kWaitMs = 60000;

// One copy stream per process (each rank is a process of its own).
void* copyStream() {
  static void* stream = createTestStream();
  return stream;
}

bool copyBlocking(void* dst, const void* src, size_t bytes) {
  DeviceRuntime* d = testDevice();
  if (d == nullptr || bytes == 0) return d != nullptr;
  Status st = d->copyAsync(dst, src, bytes, copyStream());
  if (st.isOk()) st = d->synchronize(copyStream(), kWaitMs);
  if (!st.isOk()) std::fprintf(stderr, "test device: copy of %zu bytes failed: %s\n", bytes, st.message().c_str());
  return st.isOk();
}

}  // namespace

DeviceRuntime* testDevice() {
  static DeviceRuntime* const device = fairwayProcessDeviceRuntime(nullptr);  // one lookup per process
  return device;
}

std::string whyNoTestDevice() {
  const char* why = nullptr;
  return fairwayProcessDeviceRuntime(&why) == nullptr && why != nullptr ? why : "";
}

const DeviceProbe& probeDevice() {
  static const DeviceProbe probe = [] {
    DeviceProbe p;
    int fds[2];
    if (pipe(fds) != 0) {
      p.why = "pipe failed";
      return p;
    }
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      DeviceRuntime* d = testDevice();
      char line[600];
      int n = d != nullptr ? std::snprintf(line, sizeof(line), "1 %d %d", d->memoryIsCuda() ? 1 : 0, d->deviceCount())
                           : std::snprintf(line, sizeof(line), "0 0 0 %s", whyNoTestDevice().c_str());
      (void)!write(fds[1], line, static_cast<size_t>(n));
      _exit(0);
    }
    close(fds[1]);
    std::string text;
    char buf[256];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
    close(fds[0]);
    waitpid(pid, nullptr, 0);
    int usable = 0, cuda = 0, devices = 0, used = 0;
    if (std::sscanf(text.c_str(), "%d %d %d %n", &usable, &cuda, &devices, &used) < 3) {
      p.why = "the device probe said nothing";
      return p;
    }
    p.usable = usable == 1;
    p.memoryIsCuda = cuda == 1;
    p.devices = devices;
    p.why = text.substr(static_cast<size_t>(used));
    return p;
  }();
  return probe;
}

void* createTestStream() {
  void* stream = nullptr;
  DeviceRuntime* d = testDevice();
  if (d == nullptr || !d->createStream(&stream).isOk()) return nullptr;
  return stream;
}

void destroyTestStream(void* stream) {
  if (DeviceRuntime* d = testDevice(); d != nullptr && stream != nullptr) d->destroyStream(stream);
}

int synchronizeTestStream(void* stream) {
  DeviceRuntime* d = testDevice();
  if (d == nullptr) return -1;
  Status st = d->synchronize(stream, kWaitMs);
  if (!st.isOk()) std::fprintf(stderr, "test device: %s\n", st.message().c_str());
  return st.isOk() ? 0 : -1;
}

bool copyToDevice(void* device, const void* host, size_t bytes) { return copyBlocking(device, host, bytes); }
bool copyFromDevice(void* host, const void* device, size_t bytes) { return copyBlocking(host, device, bytes); }

StreamGate::StreamGate(void* stream) {
  DeviceRuntime* d = testDevice();
  if (d != nullptr && d->allocateFlags(1, &flag_).isOk() && !d->streamWaitFlag(stream, flag_, 1).isOk()) {
    flag_ = nullptr;
  }
}

void StreamGate::open() {
  if (flag_ != nullptr) testDevice()->setFlag(flag_, 1);
}

}  // namespace fairway::testing
