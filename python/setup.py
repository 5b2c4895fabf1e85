"""The fairway Python package: the torch.distributed backend (fairway._C,
built against the torch in this environment) with the Fairway library and
its plugins inside it (fairway/lib/), so nothing need be set at run time.

    pip install --no-build-isolation ./python

builds the library with CMake (needs cmake, a C++17 compiler, and hwloc's
and UCX's development packages; CUDA and NCCL plugins too where the toolkit
is found), then the extension. --no-build-isolation: the extension must be
built against the torch it will run with, not one pip would fetch.
The library comes instead from:
  FAIRWAY_PREFIX     an installed Fairway (include/, lib/, lib/fairway/);
  FAIRWAY_BUILD_DIR  an existing CMake build of this checkout (build/lib/).
"""
import os
import pathlib
import shutil
import subprocess

import torch
from setuptools import setup
from torch.utils import cpp_extension

here = pathlib.Path(__file__).resolve().parent
checkout = here.parent


def cmake_build():
    """Builds and installs the library (no tests, no perf binaries) into
    python/build/stage; returns that prefix."""
    build = here / "build" / "cmake"
    stage = here / "build" / "stage"
    jobs = str(os.cpu_count() or 2)
    subprocess.check_call(["cmake", "-S", str(checkout), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                           "-DFAIRWAY_BUILD_TESTS=OFF", "-DFAIRWAY_BUILD_PERF=OFF",
                           f"-DCMAKE_INSTALL_PREFIX={stage}", "-DCMAKE_INSTALL_LIBDIR=lib"])
    subprocess.check_call(["cmake", "--build", str(build), "-j", jobs])
    subprocess.check_call(["cmake", "--install", str(build)])
    return stage


def library_dirs():
    """(include directory, directory with libfairway.so, directories with its plugins)."""
    prefix = os.environ.get("FAIRWAY_PREFIX")
    build_dir = os.environ.get("FAIRWAY_BUILD_DIR")
    if build_dir:
        lib = pathlib.Path(build_dir).resolve() / "lib"
        if not (lib / "libfairway.so").exists():
            raise SystemExit(f"fairway: FAIRWAY_BUILD_DIR={build_dir}: no lib/libfairway.so there (build it first)")
        return checkout / "include", lib, [lib]
    root = pathlib.Path(prefix) if prefix else cmake_build()
    lib = root / "lib"
    if not (lib / "libfairway.so").exists():
        raise SystemExit(f"fairway: no libfairway.so in {lib}")
    return root / "include", lib, [lib, lib / "fairway"]


def package_library(lib, plugin_dirs, target):
    """Copies libfairway (under its soname, the name the extension asks
    for) and every plugin into `target` (the package's fairway/lib/), where
    libfairway looks for its plugins: beside itself."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    shutil.copy2((lib / "libfairway.so").resolve(), target / "libfairway.so.0")
    for directory in plugin_dirs:
        for plugin in sorted(directory.glob("libfairway-*.so")):
            shutil.copy2(plugin.resolve(), target / plugin.name)


class BuildWithLibrary(cpp_extension.BuildExtension):
    """build_ext that first gets the library (building it if need be) and
    puts it in the package being built, so nothing is built merely to
    read the package's metadata."""

    def run(self):
        include_dir, lib_dir, plugin_dirs = library_dirs()
        for extension in self.extensions:
            extension.include_dirs.append(str(include_dir))
            extension.library_dirs.append(str(lib_dir))
        package = here / "fairway" if self.inplace else pathlib.Path(self.build_lib) / "fairway"
        package_library(lib_dir, plugin_dirs, package / "lib")
        super().run()


def torch_names_macros():
    """Newer torch renamed the backend's tensor-form collectives
    (_allgather_base is all_gather_single, _reduce_scatter_base
    reduce_scatter_single, alltoall_base all_to_all_single, and their
    coalesced forms; torch 2.11 has only the old names, 2.15 both, the old
    as deprecated aliases). The backend overrides the names the torch it is
    built against declares, read from that torch's own header."""
    header = pathlib.Path(cpp_extension.include_paths()[0]) / "torch" / "csrc" / "distributed" / "c10d" / "Backend.hpp"
    renamed = header.exists() and "all_gather_single(" in header.read_text()
    return [("FAIRWAY_TORCH_SINGLE_NAMES", "1" if renamed else "0")]


sources = ["fairway/csrc/" + name for name in (
    "fairway_backend.cpp", "collectives.cpp", "coalesced.cpp", "exchanges.cpp", "work.cpp", "tensors.cpp",
    "completions.cpp", "scratch_pool.cpp", "reconfigure.cpp", "module.cpp")]
common = dict(
    libraries=["fairway"],
    define_macros=torch_names_macros(),
    # fairway/_C.so finds fairway/lib/libfairway.so.0 wherever the package is.
    extra_link_args=["-Wl,-rpath,$ORIGIN/lib"],
)

# CUDA tensors need torch's CUDA headers, present in a CUDA build of torch
# where a CUDA toolkit is installed; otherwise CPU tensors only (said at run time).
with_cuda = torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None
if with_cuda:
    extension = cpp_extension.CUDAExtension(
        "fairway._C", sources, extra_compile_args={"cxx": ["-O2"]},
        **dict(common, define_macros=common["define_macros"] + [("FAIRWAY_TORCH_CUDA", "1")]))
else:
    extension = cpp_extension.CppExtension("fairway._C", sources, extra_compile_args=["-O2"], **common)

setup(
    name="fairway",
    version="0.1.0",
    packages=["fairway", "fairway.torch"],
    ext_modules=[extension],
    install_requires=["torch"],
    python_requires=">=3.9",
    cmdclass={"build_ext": BuildWithLibrary},
)
