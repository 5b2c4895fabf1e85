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
Nothing is written into the source tree: the build's files go to
FAIRWAY_PYTHON_BUILD_DIR, else FAIRWAY_BUILD_DIR/python, else a directory
of their own in the temporary directory, removed when the build ends.
pip shows a build's output only with -v; where there is a terminal, the
steps and their progress are written to it as well.
"""
import atexit
import contextlib
import functools
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading

import torch
from setuptools import setup
from torch.utils import cpp_extension

here = pathlib.Path(__file__).resolve().parent
checkout = here.parent


@functools.lru_cache(maxsize=None)
def build_root():
    named = os.environ.get("FAIRWAY_PYTHON_BUILD_DIR") or (
        os.environ.get("FAIRWAY_BUILD_DIR") and os.path.join(os.environ["FAIRWAY_BUILD_DIR"], "python"))
    if named:
        root = pathlib.Path(named).resolve()
        root.mkdir(parents=True, exist_ok=True)
        return root
    root = pathlib.Path(tempfile.mkdtemp(prefix="fairway-python-build-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def open_terminal():
    """The terminal the user watches when pip captures this build's output
    (stderr is then a pipe), else None: stderr is shown as it is."""
    if sys.stderr.isatty():
        return None
    try:
        return open("/dev/tty", "w", buffering=1)
    except OSError:
        return None


terminal = open_terminal()


teeing = False  # whether output_to_terminal copies stderr to the terminal now


def say(line):
    """One line of progress: on stderr (pip -v, logs) and on the terminal."""
    print(f"fairway: {line}", file=sys.stderr, flush=True)
    if terminal is not None and not teeing:
        terminal.write(f"fairway: {line}\n")


def copy_lines(read_end, captured):
    """Copies each line from read_end to the captured stream and the terminal."""
    with os.fdopen(read_end, "rb", buffering=0) as source:
        for line in iter(source.readline, b""):
            os.write(captured, line)
            terminal.write(line.decode(errors="replace"))


@contextlib.contextmanager
def output_to_terminal():
    """While active, whatever this process and its children write to
    stdout and stderr (CMake's and the compiler's progress) also goes to
    the terminal, line by line."""
    global teeing
    if terminal is None:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    read_end, write_end = os.pipe()
    for fd in (1, 2):
        os.dup2(write_end, fd)
    os.close(write_end)
    copier = threading.Thread(target=copy_lines, args=(read_end, saved[1]), daemon=True)
    copier.start()
    teeing = True
    try:
        yield
    finally:
        teeing = False
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, original in zip((1, 2), saved):
            os.dup2(original, fd)  # the pipe's last write end closes: the copy ends
        # Bounded: a process the build left running may still hold the pipe.
        copier.join(timeout=10)
        if not copier.is_alive():  # else it still writes to the captured stream
            for original in saved:
                os.close(original)


def cmake_build(root):
    """Builds and installs the library (no tests, no perf binaries; CMAKE_ARGS
    adds options) into root/stage; returns that prefix."""
    build = root / "cmake"
    stage = root / "stage"
    jobs = str(os.cpu_count() or 2)
    say(f"building the library with CMake in {build}")
    subprocess.check_call(["cmake", "-S", str(checkout), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                           "-DFAIRWAY_BUILD_TESTS=OFF", "-DFAIRWAY_BUILD_PERF=OFF",
                           f"-DCMAKE_INSTALL_PREFIX={stage}", "-DCMAKE_INSTALL_LIBDIR=lib"]
                          + shlex.split(os.environ.get("CMAKE_ARGS", "")))
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
    root = pathlib.Path(prefix) if prefix else cmake_build(build_root())
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
        with output_to_terminal():
            include_dir, lib_dir, plugin_dirs = library_dirs()
            for extension in self.extensions:
                extension.include_dirs.append(str(include_dir))
                extension.library_dirs.append(str(lib_dir))
            package = here / "fairway" if self.inplace else pathlib.Path(self.build_lib) / "fairway"
            package_library(lib_dir, plugin_dirs, package / "lib")
            temp = pathlib.Path(self.build_temp).resolve()
            compile_through_ccache(temp)
            groups = compile_groups(build_jobs(), temp / "groups")
            for extension in self.extensions:
                extension.sources = [str(group) for group in groups]
            say(f"library and plugins from {lib_dir}; compiling the extension against torch "
                f"{torch.__version__} ({len(sources)} files in {len(groups)} groups, up to a CPU-minute "
                "and 1.6 GB each)")
            super().run()


def compile_through_ccache(temp):
    """Where ccache is installed (and neither CXX nor FAIRWAY_CCACHE=0 says
    otherwise), the extension compiles through it: torch's build runs CXX, so
    CXX becomes a link named c++ to ccache, which then runs the c++ found on
    PATH. Paths under the checkout are taken relative to the build's own
    directory (CCACHE_BASEDIR), so a build in build-gpu/ (the GPU check)
    hits what one in build/ compiled."""
    ccache = shutil.which("ccache")
    if ccache is None or "CXX" in os.environ or os.environ.get("FAIRWAY_CCACHE", "1") == "0":
        return
    link = temp / "ccache" / "c++"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink() or os.readlink(link) != ccache:
        link.unlink(missing_ok=True)
        link.symlink_to(ccache)
    os.environ.update(CXX=str(link), CCACHE_BASEDIR=str(checkout), CCACHE_NOHASHDIR="1")
    say(f"compiling through {ccache}")


def build_jobs():
    """How many compiles run at once: MAX_JOBS, as torch's build reads it, else one per core."""
    named = os.environ.get("MAX_JOBS")
    if not named:
        return os.cpu_count() or 1
    if not named.isdigit() or int(named) < 1:
        raise SystemExit(f"fairway: MAX_JOBS={named!r}: expected a whole number of at least 1")
    return int(named)


def compile_groups(jobs, directory):
    """The extension's files as `jobs` translation units, each a file in
    `directory` that includes its members. Parsing torch's headers costs
    about 20 s a unit (c10d's Backend.hpp alone), more than the code of any
    one file, so on a few cores the files build several times faster when
    they share a parse (2 cores: 270 s one file at a time, 60 s as two
    groups); with a core per file each is its own group. Members are dealt
    largest first to the lightest group, so the groups take about the same
    time; a group file is rewritten only when it changes, so a rebuild
    compiles only the groups whose members changed."""
    directory.mkdir(parents=True, exist_ok=True)
    sizes = {here / name: (here / name).stat().st_size for name in sources}
    members = [[] for _ in range(min(jobs, len(sizes)))]
    loads = [0] * len(members)
    for path in sorted(sizes, key=lambda path: (-sizes[path], path.name)):
        lightest = loads.index(min(loads))
        members[lightest].append(path)
        loads[lightest] += sizes[path]
    groups = []
    for index, group in enumerate(members):
        text = "// Generated by python/setup.py: these files compile as one unit (compile_groups).\n" + "".join(
            f'#include "{member}"\n' for member in sorted(group))
        path = directory / f"group_{index}.cpp"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        groups.append(path)
    return groups


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
if os.environ.get("FAIRWAY_NO_CUDA", "0") == "1":
    with_cuda = False


def say_what_is_built():
    """Which optional parts this build makes, and how to leave them out."""
    if with_cuda:
        say(f"CUDA tensors: yes (torch {torch.version.cuda}, toolkit {cpp_extension.CUDA_HOME}); "
            "FAIRWAY_NO_CUDA=1 builds for CPU tensors only")
    else:
        why = ("FAIRWAY_NO_CUDA=1" if os.environ.get("FAIRWAY_NO_CUDA", "0") == "1"
               else "this torch has no CUDA" if torch.version.cuda is None else "no CUDA toolkit found")
        say(f"CUDA tensors: no ({why}): CPU tensors only")
    if not (os.environ.get("FAIRWAY_PREFIX") or os.environ.get("FAIRWAY_BUILD_DIR")):
        say("the library is built here too (CMake): its CUDA runtime and NCCL plugins where the CUDA toolkit "
            "is found; FAIRWAY_BUILD_DIR or FAIRWAY_PREFIX uses a library built already, "
            "CMAKE_ARGS=-DFAIRWAY_WITH_CUDA=OFF leaves the plugins out")


# -g1: line tables only, enough for a backtrace with files and lines; full
# debug information of torch's templates (Python's own -g) doubles the build.
compile_args = ["-O2", "-g1"]
if with_cuda:
    extension = cpp_extension.CUDAExtension(
        "fairway._C", sources, extra_compile_args={"cxx": compile_args},
        **dict(common, define_macros=common["define_macros"] + [("FAIRWAY_TORCH_CUDA", "1")]))
else:
    extension = cpp_extension.CppExtension("fairway._C", sources, extra_compile_args=compile_args, **common)

# What writes files keeps them out of the tree; what builds says first what it makes.
build_options = {}
building = any(command in sys.argv for command in ("bdist_wheel", "build", "build_ext", "install", "develop",
                                                     "editable_wheel"))
if building or any(command in sys.argv for command in ("egg_info", "dist_info")):
    root = build_root()
    build_options = {"build": {"build_base": str(root)}, "egg_info": {"egg_base": str(root)}}
if building:
    say_what_is_built()

setup(
    name="fairway",
    version="0.1.0",
    packages=["fairway", "fairway.torch"],
    ext_modules=[extension],
    install_requires=["torch"],
    python_requires=">=3.9",
    cmdclass={"build_ext": BuildWithLibrary},
    options=build_options,
)
