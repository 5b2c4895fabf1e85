"""The GPU check: python -m gpucheck [--emulated] [--quick] [STEP ...]
(scripts/gpu_check.sh runs it with the right Python). Steps, in order:
build, test, sweep, timing, torch, pytest; then the report, which every run
writes from all results so far. Exit status 2 if the library did not
build, else 1 if any item failed."""
import argparse
import os
import shlex
import sys
import time

from . import build, report, sweeps, tests, timing, torch_step
from .common import REPO, Context, clear_step, load_results

STEPS = {"build": build.run_step, "test": tests.run_step, "sweep": sweeps.run_step, "timing": timing.run_step,
         "torch": torch_step.run_step, "pytest": tests.run_python_step}


def main(argv):
    parser = argparse.ArgumentParser(prog="gpu_check", description=__doc__.split("\n")[0])
    parser.add_argument("steps", nargs="*", metavar="STEP",
                        help=f"steps to run: {', '.join(STEPS)}, all (the default) or report (only the report, "
                             "which every run writes)")
    parser.add_argument("--emulated", action="store_true",
                        help="no GPU: the host-emulated device runtime; what needs CUDA is skipped, saying so")
    parser.add_argument("--quick", action="store_true", help="a subset of each step (CI's emulated form)")
    parser.add_argument("--ranks", help="the sweep's rank counts, e.g. 1,2 (default: 1,2,4; --quick: 2), so a "
                                        "long sweep can be split across calls")
    parser.add_argument("--build-dir", default=str(REPO / "build-gpu"))
    parser.add_argument("--bundle", default=str(REPO / ".gpu-bundle"), help="scripts/gpu_bundle.sh's output")
    parser.add_argument("--out", default=os.environ.get("OUT") or str(REPO / "build-gpu" / "check" / "out"),
                        help="where the report goes (default: $OUT, else build-gpu/check/out)")
    args = parser.parse_args(argv)
    unknown = [s for s in args.steps if s not in STEPS and s not in ("all", "report")]
    if unknown:
        parser.error(f"unknown step {', '.join(unknown)}: choose from {', '.join(STEPS)}, all, report")
    try:
        ranks = [int(r) for r in args.ranks.split(",")] if args.ranks else None
    except ValueError:
        parser.error(f"--ranks {args.ranks}: not a list of rank counts such as 1,2,4")
    if ranks and any(r < 1 or r > 16 for r in ranks):
        parser.error(f"--ranks {args.ranks}: each count from 1 to 16")
    ctx = Context(args.emulated, args.quick, args.build_dir, args.out, args.bundle, sys.executable, ranks)
    command_line = "scripts/gpu_check.sh " + shlex.join(argv)
    # The report is rewritten after every item, so a call cut short still leaves it in the output.
    ctx.on_record = lambda: report.write(ctx, command_line, quiet=True)
    steps = list(STEPS) if not args.steps or "all" in args.steps else [s for s in args.steps if s != "report"]
    # Results of the other mode (emulated or GPU) say nothing about this one.
    if any(r.get("mode") != ctx.mode for r in load_results(ctx)):
        print(f"gpu_check: forgetting the results of a run in the other mode ({ctx.results})", flush=True)
        for old in ctx.results.glob("*.json"):
            old.unlink()
    start = time.monotonic()
    built = True
    for step in steps:
        print(f"gpu_check: step {step} ({ctx.mode}{', quick' if ctx.quick else ''})", flush=True)
        clear_step(ctx, step, [f"{r}r-" for r in ranks] if step == "sweep" and ranks else ("",))
        if STEPS[step](ctx) is False and step == "build":
            print("gpu_check: the build failed; later steps not run", flush=True)
            built = False
            break
    counts = report.write(ctx, command_line)
    print(f"gpu_check: {time.monotonic() - start:.0f} s", flush=True)
    return 2 if not built else 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
