"""The package as pip builds it: `pip wheel ./python` against this
checkout's build (FAIRWAY_BUILD_DIR, whose python/ keeps the compiled
objects, so this costs seconds once scripts/setup.sh has run) writes
nothing into the source tree, and the wheel installs elsewhere and runs
a collective with nothing set."""
import os
import pathlib
import subprocess
import sys

import pytest

CHECKOUT = pathlib.Path(__file__).resolve().parents[2]
BUILD = CHECKOUT / "build"


def source_files():
    """Every path under python/ but Python's caches."""
    return {p for p in (CHECKOUT / "python").rglob("*") if "__pycache__" not in p.parts}


@pytest.mark.skipif(not (BUILD / "lib" / "libfairway.so").exists(), reason="no build/ (run scripts/setup.sh)")
def test_a_wheel_builds_out_of_the_tree_and_runs_elsewhere(tmp_path):
    before = source_files()
    # As scripts/setup.sh builds it, so the compiled objects there serve.
    env = dict(os.environ, FAIRWAY_BUILD_DIR=str(BUILD))
    for name in ("FAIRWAY_PYTHON_BUILD_DIR", "FAIRWAY_NO_CUDA"):
        env.pop(name, None)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
                            "-w", str(tmp_path / "wheel"), str(CHECKOUT / "python")],
                           env=env, capture_output=True, text=True, timeout=1800)
    assert built.returncode == 0, built.stdout + built.stderr
    assert source_files() == before, "the build wrote into python/"
    wheels = list((tmp_path / "wheel").glob("fairway-*.whl"))
    assert len(wheels) == 1
    site = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
                                str(wheels[0])], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    run_env = {k: v for k, v in os.environ.items() if not k.startswith(("FAIRWAY_", "LD_LIBRARY_PATH"))}
    run_env.update(PYTHONPATH=str(site), MASTER_ADDR="127.0.0.1", MASTER_PORT="0")
    script = ("import torch, torch.distributed as dist, fairway, fairway.torch\n"
              f"assert fairway.__file__.startswith({str(site)!r}), fairway.__file__\n"
              "store = dist.HashStore()\n"
              "dist.init_process_group('fairway', store=store, rank=0, world_size=1)\n"
              "t = torch.arange(4.0); dist.all_reduce(t); assert t.tolist() == [0.0, 1.0, 2.0, 3.0], t\n"
              "dist.destroy_process_group(); print('ran')\n")
    ran = subprocess.run([sys.executable, "-c", script], env=run_env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert ran.returncode == 0 and "ran" in ran.stdout, ran.stdout + ran.stderr
