#include "topo/hw_topology.h"

#include <hwloc.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <thread>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace fairway {
namespace {

constexpr unsigned kNvidiaVendorId = 0x10de;
constexpr unsigned kDisplayClass = 0x03;   // PCI base class of GPUs
constexpr unsigned kNetworkClass = 0x02;   // ethernet, infiniband, ...

struct TopologyHandle {
  hwloc_topology_t topology = nullptr;
  ~TopologyHandle() {
    if (topology != nullptr) hwloc_topology_destroy(topology);
  }
};

std::string busIdOf(hwloc_obj_t pci) {
  char text[32];
  std::snprintf(text, sizeof(text), "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain, pci->attr->pcidev.bus,
                pci->attr->pcidev.dev, pci->attr->pcidev.func);
  return text;
}

// The NUMA node an I/O object hangs from, when exactly one is local to it.
int numaNodeOf(hwloc_topology_t topology, hwloc_obj_t io) {
  hwloc_obj_t ancestor = hwloc_get_non_io_ancestor_obj(topology, io);
  if (ancestor == nullptr || ancestor->nodeset == nullptr || hwloc_bitmap_weight(ancestor->nodeset) != 1) return -1;
  return hwloc_bitmap_first(ancestor->nodeset);
}

int depthOf(hwloc_obj_t obj) {
  int depth = 0;
  for (hwloc_obj_t o = obj; o->parent != nullptr; o = o->parent) ++depth;
  return depth;
}

// Hops through the tree from a to b: up to their common ancestor and down.
int treeDistance(hwloc_obj_t a, hwloc_obj_t b) {
  int da = depthOf(a), db = depthOf(b);
  int hops = 0;
  while (da > db) { a = a->parent; --da; ++hops; }
  while (db > da) { b = b->parent; --db; ++hops; }
  while (a != b) { a = a->parent; b = b->parent; hops += 2; }
  return hops;
}

// The OS device's type as an integer: hwloc copies it from a topology file
// unchecked, and an enum loaded with a value outside its range is
// undefined behaviour (found by fuzz_topology: osdev_type="10000").
int osdevTypeOf(hwloc_obj_t osdev) {
  int type = -1;
  static_assert(sizeof(osdev->attr->osdev.type) == sizeof(int), "hwloc's osdev type is an int-sized enum");
  std::memcpy(&type, &osdev->attr->osdev.type, sizeof type);
  return type;
}

bool isCudaOsDevice(hwloc_obj_t osdev) {
  const int type = osdevTypeOf(osdev);
  if (type == HWLOC_OBJ_OSDEV_COPROC) return osdev->subtype != nullptr && std::strcmp(osdev->subtype, "CUDA") == 0;
  if (type == HWLOC_OBJ_OSDEV_GPU) return osdev->name != nullptr && std::strncmp(osdev->name, "nvml", 4) == 0;
  return false;
}

struct Classified {
  bool gpu = false;
  bool nic = false;
  bool rdma = false;
  std::string name;
};

// A PCI device is a GPU when CUDA or NVML named it, or when it is an NVIDIA
// display controller (hwloc built without the CUDA plugins still sees those).
// It is a NIC when it is a network-class device or carries a network or
// OpenFabrics OS device; OpenFabrics names win, since they are what RDMA uses.
Classified classify(hwloc_obj_t pci) {
  Classified c;
  unsigned baseClass = pci->attr->pcidev.class_id >> 8;
  c.gpu = baseClass == kDisplayClass && pci->attr->pcidev.vendor_id == kNvidiaVendorId;
  c.nic = baseClass == kNetworkClass;
  std::string cudaName, nvmlName, fabricName, netName;
  for (hwloc_obj_t child = pci->io_first_child; child != nullptr; child = child->next_sibling) {
    if (child->type != HWLOC_OBJ_OS_DEVICE || child->name == nullptr) continue;
    if (isCudaOsDevice(child)) {
      c.gpu = true;
      (osdevTypeOf(child) == HWLOC_OBJ_OSDEV_COPROC ? cudaName : nvmlName) = child->name;
    } else if (osdevTypeOf(child) == HWLOC_OBJ_OSDEV_OPENFABRICS) {
      c.nic = c.rdma = true;
      fabricName = child->name;
    } else if (osdevTypeOf(child) == HWLOC_OBJ_OSDEV_NETWORK) {
      c.nic = true;
      netName = child->name;
    }
  }
  if (c.gpu) c.name = !cudaName.empty() ? cudaName : nvmlName;
  else if (c.nic) c.name = c.rdma ? fabricName : netName;
  return c;
}

Status hwlocError(const std::string& what, const std::string& file) {
  std::string message = what;
  if (!file.empty()) message = "FAIRWAY_TOPO_FILE=" + file + ": " + what;
  return Status(fwInvalidArgument, message + ": " + std::strerror(errno));
}

}  // namespace

std::string NetDevice::ucxDeviceName() const { return rdma ? name + ":1" : name; }

int HwTopology::gpuByBusId(const std::string& busId) const {
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i].busId == busId) return static_cast<int>(i);
  }
  return -1;
}

namespace {

// True when child `pid` has exited before `limit` (it is left to be reaped).
// Its pidfd becomes readable at exit, so one poll bounds the wait; kernels
// older than 5.3 have no pidfd and are polled every millisecond instead.
bool childExitedWithin(pid_t pid, std::chrono::milliseconds limit) {
  // Through syscall(): glibc 2.36's <sys/pidfd.h> lacks C linkage for C++.
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    pollfd exited{pidfd, POLLIN, 0};
    int ready;
    do {
      ready = poll(&exited, 1, static_cast<int>(limit.count()));
    } while (ready < 0 && errno == EINTR);
    close(pidfd);
    return ready > 0;
  }
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// How far hwloc got with the XML in the probe's child, and its errno.
struct ProbeReport {
  enum Step : int { kLoaded, kInitFailed, kSourceRefused, kLoadRefused } step = kLoaded;
  int error = 0;
};

void probeInThisChild(const std::function<bool(hwloc_topology_t)>& setSource, int reportFd) {
  // A crash here is the expected outcome for some files: die of the signal
  // quietly, without the parent's crash handlers (a sanitizer's, a
  // fuzzer's, the application's) reporting it or writing files, and
  // without a core dump.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) signal(sig, SIG_DFL);
  rlimit noCore{0, 0};
  setrlimit(RLIMIT_CORE, &noCore);
  ProbeReport report;
  hwloc_topology_t topology = nullptr;
  if (hwloc_topology_init(&topology) != 0) {
    report.step = ProbeReport::kInitFailed;
  } else {
    hwloc_topology_set_io_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (!setSource(topology)) report.step = ProbeReport::kSourceRefused;
    else if (hwloc_topology_load(topology) != 0) report.step = ProbeReport::kLoadRefused;
  }
  report.error = errno;
  ssize_t written = write(reportFd, &report, sizeof report);
  _exit(written == static_cast<ssize_t>(sizeof report) ? 0 : 1);
}

// Reads the XML in a child process first: hwloc 2.9 dereferences NULL on
// some malformed files (a NUMA node without a nodeset) and leaks what it
// built when it refuses others, both found by the topology fuzzer. A bad
// FAIRWAY_TOPO_FILE must be an error, not a crash or a leak, so the parent
// loads only what the child loaded, and reports the child's refusal
// itself. The wait is bounded.
Status probeXmlInChild(const std::function<bool(hwloc_topology_t)>& setSource, const std::string& xmlFile) {
  int reportPipe[2];
  if (pipe2(reportPipe, O_CLOEXEC) != 0) {
    return Status(fwSystemError, std::string("pipe to check the topology file: ") + std::strerror(errno));
  }
  pid_t pid = fork();
  if (pid < 0) {
    int forkError = errno;
    close(reportPipe[0]);
    close(reportPipe[1]);
    return Status(fwSystemError, std::string("fork to check the topology file: ") + std::strerror(forkError));
  }
  if (pid == 0) {
    close(reportPipe[0]);
    probeInThisChild(setSource, reportPipe[1]);
  }
  close(reportPipe[1]);
  bool exited = childExitedWithin(pid, std::chrono::seconds(30));
  if (!exited) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ProbeReport report;
  bool reported = exited && read(reportPipe[0], &report, sizeof report) == static_cast<ssize_t>(sizeof report);
  close(reportPipe[0]);
  if (!exited) {
    return Status(fwInvalidArgument, "FAIRWAY_TOPO_FILE=" + xmlFile + ": hwloc did not finish reading it in 30 s");
  }
  if (!reported || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string how = WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                          : "exit code " + std::to_string(WEXITSTATUS(status));
    return Status(fwInvalidArgument, "FAIRWAY_TOPO_FILE=" + xmlFile + ": hwloc crashed reading it (" + how +
                                         "): the file is not valid hwloc XML");
  }
  errno = report.error;
  switch (report.step) {
    case ProbeReport::kLoaded: return Status::ok();
    case ProbeReport::kInitFailed: return hwlocError("hwloc_topology_init failed", "");
    case ProbeReport::kSourceRefused: return hwlocError("cannot open as hwloc XML", xmlFile);
    case ProbeReport::kLoadRefused: return hwlocError("hwloc could not load the topology", xmlFile);
  }
  return hwlocError("unknown outcome of the hwloc probe", xmlFile);
}

}  // namespace

Status HwTopology::load(const std::string& xmlFile, const std::string& dumpFile, HwTopology* out) {
  auto setSource = [&](hwloc_topology_t topology) {
    return xmlFile.empty() || hwloc_topology_set_xml(topology, xmlFile.c_str()) == 0;
  };
  if (!xmlFile.empty()) FW_RETURN_IF_ERROR(probeXmlInChild(setSource, xmlFile));
  return loadFrom(setSource, xmlFile, dumpFile, out);
}

Status HwTopology::loadXmlBuffer(const char* xml, size_t bytes, HwTopology* out) {
  if (bytes > static_cast<size_t>(INT_MAX)) return Status(fwInvalidArgument, "hwloc XML buffer too large");
  auto setSource = [&](hwloc_topology_t topology) {
    return hwloc_topology_set_xmlbuffer(topology, xml, static_cast<int>(bytes)) == 0;
  };
  FW_RETURN_IF_ERROR(probeXmlInChild(setSource, "(XML buffer)"));
  return loadFrom(setSource, "(XML buffer)", "", out);
}

Status HwTopology::loadFrom(const std::function<bool(hwloc_topology_t)>& setSource, const std::string& xmlFile,
                            const std::string& dumpFile, HwTopology* out) {
  // hwloc loads its plugins (the OpenCL and GL probes with their vendor
  // libraries, libxml2's reader) with the first topology and unloads them
  // with the last, dropping those libraries' one-time state each time. One
  // topology held for the life of the process keeps them loaded once.
  static const bool pluginsHeld = [] {
    static hwloc_topology_t held = nullptr;
    return hwloc_topology_init(&held) == 0;
  }();
  (void)pluginsHeld;
  TopologyHandle handle;
  if (hwloc_topology_init(&handle.topology) != 0) return hwlocError("hwloc_topology_init failed", "");
  // Keep the PCI devices and bridges that lead to GPUs and NICs: the bridges
  // are what makes one NIC nearer to a GPU than another.
  hwloc_topology_set_io_types_filter(handle.topology, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (!setSource(handle.topology)) return hwlocError("cannot open as hwloc XML", xmlFile);
  if (hwloc_topology_load(handle.topology) != 0) return hwlocError("hwloc could not load the topology", xmlFile);
  hwloc_topology_t topo = handle.topology;

  HwTopology t;
  t.source = xmlFile.empty() ? "hwloc discovery" : xmlFile;
  t.packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  t.numaNodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  t.cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  t.processingUnits = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);

  std::vector<hwloc_obj_t> gpuObjects, nicObjects;
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo, nullptr); pci != nullptr; pci = hwloc_get_next_pcidev(topo, pci)) {
    Classified c = classify(pci);
    if (!c.gpu && !c.nic) continue;
    PciDevice device;
    device.busId = busIdOf(pci);
    device.name = c.name;
    device.numaNode = numaNodeOf(topo, pci);
    if (c.gpu) {
      t.gpus.push_back(device);
      gpuObjects.push_back(pci);
    } else {
      NetDevice nic;
      static_cast<PciDevice&>(nic) = device;
      nic.rdma = c.rdma;
      t.nics.push_back(nic);
      nicObjects.push_back(pci);
    }
  }
  // Bus order, so GPU i means the same device in every listing.
  auto sortByBus = [](auto& devices, std::vector<hwloc_obj_t>& objects) {
    std::vector<size_t> order(devices.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return devices[a].busId < devices[b].busId; });
    auto sortedDevices = devices;
    auto sortedObjects = objects;
    for (size_t i = 0; i < order.size(); ++i) {
      sortedDevices[i] = devices[order[i]];
      sortedObjects[i] = objects[order[i]];
    }
    devices = sortedDevices;
    objects = sortedObjects;
  };
  sortByBus(t.gpus, gpuObjects);
  sortByBus(t.nics, nicObjects);

  for (hwloc_obj_t gpu : gpuObjects) {
    int best = -1, bestHops = 0;
    for (size_t n = 0; n < nicObjects.size(); ++n) {
      int hops = treeDistance(gpu, nicObjects[n]);
      if (best < 0 || hops < bestHops) {
        best = static_cast<int>(n);
        bestHops = hops;
      }
    }
    t.nicOfGpu.push_back(best);
  }

  if (!dumpFile.empty() && hwloc_topology_export_xml(topo, dumpFile.c_str(), 0) != 0) {
    return Status(fwInvalidArgument, "FAIRWAY_TOPO_DUMP_FILE=" + dumpFile + ": cannot write: " + std::strerror(errno));
  }
  *out = std::move(t);
  return Status::ok();
}

}  // namespace fairway
