"""The yardsticks of scripts/torch_floor_backend.cpp, compiled at run time
against the torch and the Fairway being measured: the "fairway_floor"
backend (collectives that do nothing) and the C API loop."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLOOR_BACKEND = "fairway_floor"


def load_yardsticks():
    """The compiled module (built on first use into build/torch_floor_backend)."""
    import fairway
    from torch.utils.cpp_extension import load
    lib = os.path.join(os.path.dirname(fairway.__file__), "lib")
    build = os.path.join(ROOT, "build", "torch_floor_backend")
    os.makedirs(build, exist_ok=True)
    return load("fairway_torch_floor", [os.path.join(ROOT, "scripts", "torch_floor_backend.cpp")],
                extra_include_paths=[os.path.join(ROOT, "include")],
                extra_ldflags=[f"-L{lib}", "-l:libfairway.so.0", f"-Wl,-rpath,{lib}"],
                build_directory=build, verbose=False)


def register_floor_backend():
    """Registers FLOOR_BACKEND with torch.distributed; returns the module."""
    import torch.distributed as dist
    yard = load_yardsticks()
    dist.Backend.register_backend(FLOOR_BACKEND, lambda store, r, s, timeout: yard.make_floor(store, r, s),
                                  devices=["cpu"])
    return yard
