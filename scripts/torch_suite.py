#!/usr/bin/env python3
"""Runs torch's DistributedTest suite against Fairway on CPU and compares
with gloo on the same machine (scripts/torch_suite/dist_suite.py runs it).

    .venv/bin/python scripts/torch_suite.py                 # the whole run
    .venv/bin/python scripts/torch_suite.py --subset ci     # CI's few minutes
    .venv/bin/python scripts/torch_suite.py -k test_barrier # some tests

Modes: gloo (the real gloo: the baseline), plugin (Fairway under its own
name) and gloo-gated (Fairway bound to the name "gloo", so the suite's
gloo-only CPU tests run on it). For each world size it fails when:
  - a test fails in plugin mode;
  - a test gloo passes does not pass in gloo-gated mode, unless it is a
    check of the backend's name (expected.NAME_CHECKS);
  - plugin mode skips a test gloo runs, the test does not pass in
    gloo-gated mode either, and expected.PLUGIN_SKIPS gives no reason.
Results: <out>/summary.md, summary.json and one log per mode and size.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "torch_suite"))
import expected  # noqa: E402

SUITE = os.path.join(HERE, "torch_suite", "dist_suite.py")


def run_one(mode, ranks, tests, patterns, out_dir, limit_s):
    results_path = os.path.join(out_dir, f"{mode}-{ranks}.jsonl")
    log_path = os.path.join(out_dir, f"{mode}-{ranks}.log")
    if os.path.exists(results_path):
        os.remove(results_path)
    args = [sys.executable, SUITE]
    for pattern in patterns:
        args += ["-k", pattern]
    args += [f"TestDistBackendWithSpawn.{t}" for t in tests]
    with tempfile.TemporaryDirectory(prefix="fairway-suite-") as temp_dir:
        env = dict(os.environ, FAIRWAY_SUITE_MODE=mode, WORLD_SIZE=str(ranks), TEMP_DIR=temp_dir,
                   FAIRWAY_SUITE_RESULTS=results_path, PYTORCH_PRINT_REPRO_ON_FAILURE="0")
        start = time.monotonic()
        with open(log_path, "w") as log:
            try:
                subprocess.run(args, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=limit_s, check=False)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
        seconds = time.monotonic() - start
    outcomes = {}
    if os.path.exists(results_path):
        with open(results_path) as f:
            for line in f:
                record = json.loads(line)
                outcomes[record["test"]] = record
    print(f"torch_suite: {mode:10s} {ranks} ranks: " + ", ".join(
        f"{n} {o}" for o, n in sorted(collections.Counter(r["outcome"] for r in outcomes.values()).items()))
        + f" in {seconds:.0f} s" + (" (TIMED OUT)" if timed_out else ""), flush=True)
    return {"outcomes": outcomes, "seconds": seconds, "timed_out": timed_out, "log": log_path}


def counts(run):
    c = collections.Counter(r["outcome"] for r in run["outcomes"].values())
    return {k: c.get(k, 0) for k in ("passed", "failed", "skipped")}


def judge(runs, ranks):
    """The problems of one world size, as lines; empty when it is clean."""
    problems = []
    plugin = runs.get(("plugin", ranks))
    gated = runs.get(("gloo-gated", ranks))
    gloo = runs.get(("gloo", ranks))
    for mode, run in (("plugin", plugin), ("gloo-gated", gated)):
        if run and run["timed_out"]:
            problems.append(f"{mode}, {ranks} ranks: the run passed its time limit ({run['log']})")
    if plugin:
        for name, r in sorted(plugin["outcomes"].items()):
            if r["outcome"] == "failed":
                problems.append(f"plugin, {ranks} ranks: {name} failed: {last_line(r['detail'])}")
    if gated:
        for name, r in sorted(gated["outcomes"].items()):
            if r["outcome"] != "failed":
                continue
            if gloo is None or gloo["outcomes"].get(name, {}).get("outcome") == "passed":
                if name not in expected.NAME_CHECKS:
                    problems.append(f"gloo-gated, {ranks} ranks: {name} failed: {last_line(r['detail'])}")
    if plugin and gated and gloo:
        for name, r in sorted(plugin["outcomes"].items()):
            ran_on_gloo = gloo["outcomes"].get(name, {}).get("outcome") == "passed"
            if r["outcome"] == "skipped" and ran_on_gloo:
                if gated["outcomes"].get(name, {}).get("outcome") != "passed" and name not in expected.PLUGIN_SKIPS:
                    problems.append(f"plugin, {ranks} ranks: {name} skipped ({r['detail']}), gloo runs it, "
                                    "and it does not pass in gloo-gated mode either")
    return problems


def last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default="gloo,plugin,gloo-gated")
    parser.add_argument("--ranks", default="2,3")
    parser.add_argument("--subset", choices=["ci"], help="only expected.CI_TESTS, without the gloo baseline")
    parser.add_argument("-k", dest="patterns", action="append", default=[], help="unittest -k pattern")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "build", "torch_suite"))
    parser.add_argument("--limit-s", type=int, default=3600, help="time limit of one mode at one size")
    args = parser.parse_args()
    modes = args.modes.split(",")
    tests = []
    if args.subset == "ci":
        modes = [m for m in modes if m != "gloo"]
        tests = expected.CI_TESTS
    os.makedirs(args.out, exist_ok=True)
    runs = {}
    sizes = [int(r) for r in args.ranks.split(",")]
    for ranks in sizes:
        for mode in modes:
            runs[(mode, ranks)] = run_one(mode, ranks, tests, args.patterns, args.out, args.limit_s)
    problems = [p for ranks in sizes for p in judge(runs, ranks)]
    lines = ["| mode | ranks | passed | failed | skipped | seconds |", "|---|---|---|---|---|---|"]
    for (mode, ranks), run in runs.items():
        c = counts(run)
        lines.append(f"| {mode} | {ranks} | {c['passed']} | {c['failed']} | {c['skipped']} | {run['seconds']:.0f} |")
    summary = "\n".join(lines) + "\n\n" + ("\n".join(f"- {p}" for p in problems) if problems else "No problems.") + "\n"
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(summary)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump({f"{m}-{r}": {"counts": counts(run), "seconds": run["seconds"],
                                "outcomes": {n: o["outcome"] for n, o in run["outcomes"].items()}}
                   for (m, r), run in runs.items()}, f, indent=1)
    print(summary)
    return 1 if problems or not runs else 0


if __name__ == "__main__":
    sys.exit(main())
