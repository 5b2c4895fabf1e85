"""Step timing: each figure against its reference in the same run, as
medians of interleaved repeats. Under the host-emulated runtime the
figures are the program's own check, not GPU figures: no target is judged."""
import json
import os
import re
import tempfile

from .common import figure, median, record, run
from .sweeps import UCX_DIRECT, UCX_STAGED, perf_run

STEP = "timing"
REPEATS = 3
CALL_TARGET_US = 20
NCCL_TARGET = 1.03      # at most 3% slower than nccl_perf, from 1 MiB
KERNEL_TARGET = 85.0    # percent of a device-to-device copy's bandwidth, from 16 MiB
MIB = 1 << 20


def judged(ctx, met):
    return None if ctx.emulated else met


def times_by_size(data):
    return {r["size"]: r["out_of_place"]["time_us"] for r in data["rows"]}


def interleaved(ctx, name, variants, ranks, args, nodes=None):
    """variants: (label, env); runs each REPEATS times in turn; returns
    {label: {size: median out-of-place time in us}} and the failures."""
    samples, failures = {label: {} for label, _ in variants}, []
    for repeat in range(REPEATS):
        for label, env in variants:
            ran, data = perf_run(ctx, f"{name}-{label}-{repeat}", "all_reduce_perf", ranks, env, args, nodes)
            if data is None or not ran.ok or data["wrong"]:
                failures.append(f"{label}: exit {ran.rc}, {data['wrong'] if data else '?'} wrong: {ran.tail(2)}")
                continue
            for size, us in times_by_size(data).items():
                samples[label].setdefault(size, []).append(us)
    return {label: {s: median(v) for s, v in by.items()} for label, by in samples.items()}, failures


def nccl_times(ctx, args):
    """nccl_perf's allreduce on one rank: {size: time in us}, or the reason it did not run."""
    binary = ctx.bin / "nccl_perf"
    if not binary.exists():
        return None, "nccl_perf was not built (no NCCL found at configure time)"
    with tempfile.TemporaryDirectory() as store:
        ran = run(ctx, "timing-nccl_perf", [str(ctx.bin / "fairwayrun"), "-np", "1", str(binary), "-C", "allreduce"]
                  + args, env={"PEER_STORE_DIR": store}, timeout=600)
    if not ran.ok:
        return None, ran.tail(2)
    rows = [line.split() for line in ran.output.splitlines() if line.strip() and not line.startswith("#")]
    return {int(f[0]): float(f[5]) for f in rows if len(f) >= 8 and f[0].isdigit()}, ""


def nccl_against_nccl_perf(ctx):
    args = ["-b", "1K", "-e", "4M" if ctx.emulated else "256M", "-f", "4", "-n", "20", "-w", "5"]
    forced = {} if ctx.emulated else {"FAIRWAY_INTRA_TRANSPORT": "nccl"}
    fairway, failures = interleaved(ctx, "nccl", [("fairway", forced)], 1, args)
    if ctx.emulated:
        record(ctx, STEP, "nccl_overhead", "NCCL-path allreduce against nccl_perf, 1 rank", "skip",
               "nccl_perf needs a CUDA device (the Fairway side ran on the emulated runtime's stand-in: "
               f"{len(fairway['fairway'])} sizes{', ' + '; '.join(failures) if failures else ''})")
        return
    samples = {}
    for _ in range(REPEATS):
        times, why = nccl_times(ctx, args)
        if times is None:
            record(ctx, STEP, "nccl_overhead", "NCCL-path allreduce against nccl_perf, 1 rank", "fail", why)
            return
        for size, us in times.items():
            samples.setdefault(size, []).append(us)
    nccl = {s: median(v) for s, v in samples.items()}
    rows, worst = [], 0.0
    for size in sorted(fairway["fairway"]):
        if size not in nccl:
            continue
        ratio = fairway["fairway"][size] / nccl[size]
        if size >= MIB:
            worst = max(worst, ratio)
        rows.append([size, f"{fairway['fairway'][size]:.2f}", f"{nccl[size]:.2f}", f"{ratio:.3f}"])
    met = not failures and bool(rows) and worst <= NCCL_TARGET
    record(ctx, STEP, "nccl_overhead", "NCCL-path allreduce against nccl_perf, 1 rank", "pass" if met else "fail",
           "; ".join(failures), figures=[figure("worst ratio from 1 MiB", round(worst, 3), "x nccl_perf time")],
           table={"columns": ["size (B)", "fairway (us)", "nccl_perf (us)", "ratio"], "rows": rows},
           target=f"at most {NCCL_TARGET:.2f}x nccl_perf's time from 1 MiB", met=met)


def calling_thread(ctx):
    """The slowest rank's time inside one call, per path and size, from the sweep's runs."""
    per_run = {}
    for path in sorted((ctx.work / "json").glob("*.json")):
        if not re.match(r"\d+r-", path.name):  # the sweep's runs are "<ranks>r-<path>-<run>"
            continue
        calls = [r[p]["call_us"] for r in json.loads(path.read_text())["rows"] for p in ("out_of_place", "in_place")
                 if r.get(p)]
        if calls:
            per_run[path.stem] = max(calls)
    if not per_run:
        record(ctx, STEP, "call_time", "calling thread's time inside one device call", "skip",
               "no sweep results: run the sweep step first")
        return
    worst = max(per_run.values())
    met = worst < CALL_TARGET_US
    record(ctx, STEP, "call_time", "calling thread's time inside one device call (largest over sizes and ranks)",
           ("pass" if met else "fail") if not ctx.emulated else "info",
           "" if not ctx.emulated else "emulated runtime: the calls' cost on a GPU is not shown here",
           figures=[figure("largest", round(worst, 2), "us")],
           table={"columns": ["run", "largest call (us)"], "rows": [[k, f"{v:.2f}"] for k, v in per_run.items()]},
           target=f"under {CALL_TARGET_US} us at every size", met=judged(ctx, met))


def direct_against_staged(ctx):
    args = ["-b", "1K", "-e", "4M" if ctx.emulated else "256M", "-f", "4", "-n", "10", "-w", "3"]
    medians, failures = interleaved(ctx, "direct_vs_staged", [("direct", UCX_DIRECT), ("staged", UCX_STAGED)], 2, args)
    rows = [[s, f"{medians['direct'][s]:.2f}", f"{medians['staged'][s]:.2f}",
             f"{medians['staged'][s] / medians['direct'][s]:.2f}"]
            for s in sorted(medians["direct"]) if s in medians["staged"]]
    record(ctx, STEP, "direct_vs_staged", "allreduce, 2 ranks: UCX on device memory against pinned-host staging",
           "fail" if failures or not rows else "info", "; ".join(failures),
           table={"columns": ["size (B)", "direct (us)", "staged (us)", "staged / direct"], "rows": rows})


def stream_wait(ctx):
    args = ["-b", "1K", "-e", "1M", "-f", "4", "-n", "50", "-w", "5"]
    variants = [("memop", dict(UCX_STAGED)), ("host-function", dict(UCX_STAGED, FAIRWAY_STREAM_WAIT="host-function"))]
    medians, failures = interleaved(ctx, "wait", variants, 2, args)
    info = run(ctx, "timing-fairway-info", [str(ctx.bin / "fairway-info")], env=ctx.device_env(), timeout=120)
    method = re.search(r"release their stream through (.*)", info.output)
    rows = [[s, f"{medians['memop'][s]:.2f}", f"{medians['host-function'][s]:.2f}"]
            for s in sorted(medians["memop"]) if s in medians["host-function"]]
    record(ctx, STEP, "stream_wait", "staged allreduce, 2 ranks: cuStreamWaitValue32 against a host function",
           "fail" if failures or not rows else "info", "; ".join(failures),
           figures=[figure("auto uses", method.group(1).strip() if method else "unknown (fairway-info)", "")],
           table={"columns": ["size (B)", "auto (us)", "FAIRWAY_STREAM_WAIT=host-function (us)"], "rows": rows})


def kernels(ctx):
    out = ctx.work / "json" / "kernels.json"
    out.parent.mkdir(exist_ok=True)
    args = ["-b", "1M", "-e", "4M", "-n", "3"] if ctx.emulated else ["-b", "1M", "-e", "256M", "-f", "4", "-n", "20"]
    ran = run(ctx, "timing-kernels", [str(ctx.bin / "device_kernel_perf"), "-J", str(out)] + args,
              env=ctx.device_env(), timeout=600)
    if not ran.ok or not out.exists():
        record(ctx, STEP, "kernels", "reduction and quantization kernels against a device copy", "fail", ran.tail(4))
        return
    rows = json.loads(out.read_text())["rows"]
    counted = [r for r in rows if r["kernel"] != "copy" and r["size_bytes"] >= 16 * MIB]
    worst = min((r["percent_of_copy"] for r in counted), default=None)
    met = worst is not None and worst >= KERNEL_TARGET
    record(ctx, STEP, "kernels", "reduction and quantization kernels against a device-to-device copy",
           "info" if ctx.emulated else ("pass" if met else "fail"),
           "emulated runtime: CPU kernels, not GPU figures" if ctx.emulated else "",
           figures=[figure("lowest from 16 MiB", worst, "% of copy bandwidth")] if worst is not None else [],
           table={"columns": ["size (B)", "kernel", "time (us)", "GB/s (read + written)", "% of copy"],
                  "rows": [[r["size_bytes"], r["kernel"], r["time_us"], r["gbps"], r["percent_of_copy"]]
                           for r in rows]},
           target=f"at least {KERNEL_TARGET:.0f}% of copy bandwidth from 16 MiB", met=judged(ctx, met))


def run_step(ctx):
    os.makedirs(ctx.work / "json", exist_ok=True)
    nccl_against_nccl_perf(ctx)
    calling_thread(ctx)
    direct_against_staged(ctx)
    stream_wait(ctx)
    kernels(ctx)
