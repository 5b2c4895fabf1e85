"""Step build: configure and build Fairway with the CUDA runtime and NCCL
plugins against the NCCL the machine's torch ships and the CUDA-aware UCX
of the bundle, then the Python extension against that torch. What was
found (GPU, driver, NCCL and its version, UCX and its transports, torch)
is recorded for the report."""
import json
import os
import re
import shutil

from .common import REPO, figure, record, run

STEP = "build"

# What the check runs; the rest of the test suite stays out of this build.
TARGETS = ["fairway", "fairway-transport-ucx", "fairway-device-cuda", "fairway-transport-nccl",
           "fairway-device-emulated", "fairwayrun", "fairway-info", "device_kernel_perf", "nccl_perf",
           "fairway_gpu_tests", "fairway_device_path_tests", "all_reduce_perf", "reduce_scatter_perf",
           "all_gather_perf", "broadcast_perf", "reduce_perf", "alltoall_perf", "sendrecv_perf", "gather_perf",
           "scatter_perf"]

FIND_NCCL = r"""
import ctypes, json, os, sys
import torch
found = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "python": sys.version.split()[0]}
for base in sys.path:
    lib = os.path.join(base, "nvidia", "nccl", "lib", "libnccl.so.2")
    if os.path.exists(lib):
        found["nccl_library"] = lib
        include = os.path.join(base, "nvidia", "nccl", "include")
        if os.path.exists(os.path.join(include, "nccl.h")):
            found["nccl_include"] = include
        version = ctypes.c_int(0)
        if ctypes.CDLL(lib).ncclGetVersion(ctypes.byref(version)) == 0:
            v = version.value
            found["nccl_version"] = f"{v // 10000}.{v // 100 % 100}.{v % 100}"
        break
print(json.dumps(found))
"""


def gpu_facts(ctx):
    if ctx.emulated:
        return {"gpu": "none (host-emulated device runtime)"}
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {"gpu": "unknown: no nvidia-smi"}
    ran = run(ctx, "build-gpu-facts", [smi, "--query-gpu=name,driver_version,compute_cap,memory.total",
                                        "--format=csv,noheader"], timeout=60)
    fields = [f.strip() for f in ran.output.strip().splitlines()[0].split(",")] if ran.ok else []
    if len(fields) < 4:
        return {"gpu": f"unknown: nvidia-smi said {ran.tail(2)}"}
    return {"gpu": fields[0], "driver": fields[1], "compute_capability": fields[2], "gpu_memory": fields[3]}


def ucx_location(ctx):
    """The CUDA-aware UCX: the bundle's, else the one scripts/setup.sh unpacked."""
    for candidate in (ctx.bundle / "ucx-cu13", REPO / ".whl" / "libucx-cu13"):
        if (candidate / "lib" / "cmake" / "ucx" / "ucx-config.cmake").exists():
            return candidate
    return None


def ucx_transports(ctx, ucx):
    env = {"LD_LIBRARY_PATH": str(ucx / "lib")}
    version = run(ctx, "build-ucx-info", [str(ucx / "bin" / "ucx_info"), "-v"], env=env, timeout=60)
    devices = run(ctx, "build-ucx-info", [str(ucx / "bin" / "ucx_info"), "-d"], env=env, timeout=60)
    match = re.search(r"Library version: (\S+)", version.output)
    transports = sorted(set(re.findall(r"Transport: (\S+)", devices.output)))
    return (match.group(1) if match else "unknown"), transports


def cuda_architectures(facts):
    cap = facts.get("compute_capability", "")
    return cap.replace(".", "") if re.fullmatch(r"\d+\.\d+", cap) else "90"


def configure_args(ctx, ucx, nccl, facts):
    args = ["cmake", "-S", str(REPO), "-B", str(ctx.build), "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
            f"-DFAIRWAY_UCX_CMAKE_DIR={ucx / 'lib' / 'cmake' / 'ucx'}",
            f"-DCMAKE_CUDA_ARCHITECTURES={cuda_architectures(facts)}"]
    env = {}
    root = ctx.bundle / "root" / "usr"
    if root.exists():
        # hwloc and GoogleTest from the bundle, through pkg-config where there
        # is one (its paths rebased onto the bundle), else CMake's search path.
        args.append(f"-DCMAKE_PREFIX_PATH={root}")
        env["PKG_CONFIG_LIBDIR"] = str(root / "lib" / "x86_64-linux-gnu" / "pkgconfig")
        env["PKG_CONFIG_SYSROOT_DIR"] = str(ctx.bundle / "root")
    if "nccl_library" in nccl and "nccl_include" in nccl:
        args += [f"-DNCCL_LIBRARY={nccl['nccl_library']}", f"-DNCCL_INCLUDE_DIR={nccl['nccl_include']}"]
    nvcc = shutil.which("nvcc") or next((p for p in ("/usr/local/cuda/bin/nvcc",) if os.path.exists(p)), None)
    if nvcc:  # the toolkit nvcc belongs to, wherever the image put it
        nvcc = os.path.realpath(nvcc)
        args += [f"-DCMAKE_CUDA_COMPILER={nvcc}", f"-DCUDAToolkit_ROOT={os.path.dirname(os.path.dirname(nvcc))}"]
    if shutil.which("ninja"):
        args += ["-G", "Ninja"]
    return args, env


def extension_env(ctx):
    """The extension's build compiles its files in parallel through ninja
    (torch's BuildExtension); the ninja of torch's environment is found
    beside its Python even when that environment is not activated."""
    bin_dir = os.path.dirname(ctx.python)
    return {"FAIRWAY_BUILD_DIR": str(ctx.build), "MAX_JOBS": str(os.cpu_count() or 2),
            "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])}


def run_step(ctx):
    facts = gpu_facts(ctx)
    if not ctx.emulated and "driver" not in facts:
        record(ctx, STEP, "environment", "machine", "fail",
               f"no GPU found ({facts['gpu']}); on a machine without one, run scripts/gpu_check.sh --emulated")
        return False
    found = run(ctx, "build-find-nccl", [ctx.python, "-c", FIND_NCCL], timeout=120)
    try:
        nccl = json.loads(found.output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        record(ctx, STEP, "torch", "torch and its NCCL", "fail", f"{ctx.python} could not import torch: {found.tail(3)}")
        return False
    facts.update(nccl)
    ucx = ucx_location(ctx)
    if ucx is None:
        record(ctx, STEP, "configure", "configure", "fail",
               f"no CUDA-aware UCX: run scripts/gpu_bundle.sh first (no {ctx.bundle / 'ucx-cu13'})")
        return False
    facts["ucx_dir"] = str(ucx)
    facts["ucx_version"], facts["ucx_transports"] = ucx_transports(ctx, ucx)
    manifest = ctx.bundle / "MANIFEST"
    facts["bundle"] = manifest.read_text() if manifest.exists() else "none: system packages"
    nccl_line = (f"{nccl['nccl_library']} (NCCL {nccl.get('nccl_version', '?')})" if "nccl_library" in nccl
                 else "none found in torch's environment: the NCCL plugin is built against the toolkit's, if any")
    record(ctx, STEP, "environment", "machine, torch, NCCL and UCX", "info",
           figures=[figure("gpu", facts.get("gpu"), ""), figure("driver", facts.get("driver", "-"), ""),
                    figure("torch", f"{facts['torch']} (CUDA {facts['torch_cuda']})", ""),
                    figure("libnccl.so.2", nccl_line, ""),
                    figure("UCX", f"{facts['ucx_version']} from {ucx}", ""),
                    figure("UCX transports", " ".join(facts["ucx_transports"]), "")],
           table={"columns": ["fact", "value"], "rows": [[k, str(v)] for k, v in sorted(facts.items())]})
    args, env = configure_args(ctx, ucx, nccl, facts)
    configured = run(ctx, "build-configure", args, env=env, timeout=300)
    if not configured.ok:
        record(ctx, STEP, "configure", "configure", "fail", configured.tail(8), seconds=configured.seconds)
        return False
    plugins = [line for line in configured.output.splitlines() if "Fairway:" in line]
    record(ctx, STEP, "configure", "configure", "pass", "; ".join(p.split("Fairway:")[1].strip() for p in plugins),
           seconds=configured.seconds)
    jobs = str(os.cpu_count() or 2)
    # Only the targets this configuration has (no NCCL found: no NCCL plugin, no nccl_perf).
    listed = run(ctx, "build-targets", ["cmake", "--build", str(ctx.build), "--target", "help"], timeout=120)
    known = set(re.findall(r"[\w.+-]+", listed.output))
    targets = [t for t in TARGETS if t in known]
    built = run(ctx, "build-compile", ["cmake", "--build", str(ctx.build), "-j", jobs, "--target"] + targets,
                env=env, timeout=1800)
    record(ctx, STEP, "compile", f"library, plugins, perf binaries and device tests (-j {jobs})",
           "pass" if built.ok else "fail", "" if built.ok else built.tail(12),
           figures=[figure("build time", round(built.seconds, 1), "s")], seconds=built.seconds)
    if not built.ok:
        return False
    site = ctx.build / "python-site"
    shutil.rmtree(site, ignore_errors=True)
    shutil.rmtree(REPO / "python" / "build", ignore_errors=True)
    ext = run(ctx, "build-python", [ctx.python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                                    "--no-build-isolation", "--target", str(site), str(REPO / "python")],
              env=extension_env(ctx), timeout=1200)
    record(ctx, STEP, "python", "the fairway Python extension against this torch", "pass" if ext.ok else "fail",
           "" if ext.ok else ext.tail(12), figures=[figure("build time", round(ext.seconds, 1), "s")],
           seconds=ext.seconds)
    # Without the extension only the Python steps fail: the library's checks go on.
    return True
