"""Builds fairway._C, the torch.distributed backend, against the torch in
this environment and the Fairway library: FAIRWAY_PREFIX (an install
prefix with include/ and lib/), else this checkout's include/ and its build
directory, FAIRWAY_BUILD_DIR (default build/)."""
import os
import pathlib

import torch
from setuptools import setup
from torch.utils import cpp_extension

here = pathlib.Path(__file__).resolve().parent
prefix = os.environ.get("FAIRWAY_PREFIX")
if prefix:
    include_dir = pathlib.Path(prefix) / "include"
    lib_dir = pathlib.Path(prefix) / "lib"
else:
    include_dir = here.parent / "include"
    lib_dir = pathlib.Path(os.environ.get("FAIRWAY_BUILD_DIR", here.parent / "build")).resolve() / "lib"
if not (lib_dir / "libfairway.so").exists():
    raise SystemExit(
        f"fairway: no libfairway.so in {lib_dir}: build the project first "
        "(bash scripts/setup.sh) or set FAIRWAY_PREFIX to an installed Fairway"
    )

sources = ["fairway/csrc/fairway_backend.cpp", "fairway/csrc/module.cpp"]
common = dict(
    include_dirs=[str(include_dir)],
    library_dirs=[str(lib_dir)],
    libraries=["fairway"],
    extra_link_args=[f"-Wl,-rpath,{lib_dir}"],
)
# CUDA tensors need torch's CUDA headers, present in a CUDA build of torch
# where a CUDA toolkit is installed; otherwise CPU tensors only (said at run time).
with_cuda = torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None
if with_cuda:
    extension = cpp_extension.CUDAExtension(
        "fairway._C", sources, define_macros=[("FAIRWAY_TORCH_CUDA", "1")],
        extra_compile_args={"cxx": ["-O2"]}, **common)
else:
    extension = cpp_extension.CppExtension("fairway._C", sources, extra_compile_args=["-O2"], **common)

setup(
    name="fairway",
    version="0.1.0",
    packages=["fairway", "fairway.torch"],
    ext_modules=[extension],
    install_requires=["torch"],
    python_requires=">=3.9",
    cmdclass={"build_ext": cpp_extension.BuildExtension.with_options(use_ninja=False)},
)
