"""The GPU check: python -m gpucheck [--emulated] [--quick] [STEP ...]
(scripts/gpu_check.sh runs it with the right Python). Steps, in order:
build, test, sweep, timing, torch; then the report, which every run
writes from all results so far. Exit status 1 if any item failed."""
import argparse
import os
import shlex
import sys
import time

from . import build, report, sweeps, tests, timing, torch_step
from .common import REPO, Context, clear_step

STEPS = {"build": build.run_step, "test": tests.run_step, "sweep": sweeps.run_step, "timing": timing.run_step,
         "torch": torch_step.run_step}


def main(argv):
    parser = argparse.ArgumentParser(prog="gpu_check", description=__doc__.split("\n")[0])
    parser.add_argument("steps", nargs="*", choices=list(STEPS) + ["all", "report"], default=["all"],
                        help="steps to run (default: all); the report is always written")
    parser.add_argument("--emulated", action="store_true",
                        help="no GPU: the host-emulated device runtime; what needs CUDA is skipped, saying so")
    parser.add_argument("--quick", action="store_true", help="a subset of each step (CI's emulated form)")
    parser.add_argument("--build-dir", default=str(REPO / "build-gpu"))
    parser.add_argument("--bundle", default=str(REPO / ".gpu-bundle"), help="scripts/gpu_bundle.sh's output")
    parser.add_argument("--out", default=os.environ.get("OUT") or str(REPO / "build-gpu" / "check" / "out"),
                        help="where the report goes (default: $OUT, else build-gpu/check/out)")
    args = parser.parse_args(argv)
    ctx = Context(args.emulated, args.quick, args.build_dir, args.out, args.bundle, sys.executable)
    steps = list(STEPS) if "all" in args.steps else [s for s in args.steps if s != "report"]
    start = time.monotonic()
    for step in steps:
        print(f"gpu_check: step {step} ({ctx.mode}{', quick' if ctx.quick else ''})", flush=True)
        clear_step(ctx, step)
        if STEPS[step](ctx) is False and step == "build":
            print("gpu_check: the build failed; later steps not run", flush=True)
            break
    counts = report.write(ctx, "scripts/gpu_check.sh " + shlex.join(argv))
    print(f"gpu_check: {time.monotonic() - start:.0f} s", flush=True)
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
