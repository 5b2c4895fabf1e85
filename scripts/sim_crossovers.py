#!/usr/bin/env python3
"""Simulated crossovers at scale: which algorithm is fastest, and what the selector picks.

    scripts/sim_crossovers.py [--gpus 8,64,256,1024] [--preset h100-ndr400] [--out DIR] [-j THREADS]

For each cluster size (8 GPUs per node), collective (allreduce,
reduce-scatter, allgather) and size (1 MiB to 1 GiB, x4 or --factor), runs fairway-sim
for every algorithm that applies, plain and (allreduce, reduce-scatter)
compressed to int8, and prints a markdown table: the fastest plain
algorithm, the selector's pick and how much slower it is, and what int8
compression gains over the fastest plain algorithm. Rows where the pick is
more than 10% slower than the fastest are marked. A second table gives
each algorithm's cost-model prediction over its simulated time. The JSON
of every run goes to DIR.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIM = os.path.join(ROOT, "build", "bin", "fairway-sim")
COLLECTIVES = ["allreduce", "reduce_scatter", "allgather"]


def run(gpus, collective, preset, out, threads, compression=None, extra=(), sim=SIM, factor=4, algorithms=None):
    nodes = max(1, gpus // 8)
    tag = f"{gpus}-{collective}" + (f"-{compression}" if compression else "") + "".join(extra).replace("-", "")
    path = os.path.join(out, f"sim-{tag}.json")
    cmd = [sim, "--preset", preset, "--nodes", str(nodes), "--ranks-per-node", str(min(8, gpus)), "-c", collective,
           "-b", "1M", "-e", "1G", "-f", str(factor), "-J", path, "-j", str(threads)]
    if algorithms and not compression and "--selected" not in extra:
        cmd += ["-a", algorithms]
    if compression:
        cmd += ["-q", compression]
    cmd += list(extra)
    start = time.time()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(path) as f:
        rows = json.load(f)["rows"]
    print(f"# {tag}: {time.time() - start:.1f} s", file=sys.stderr, flush=True)
    by_size = {}
    for r in rows:
        by_size.setdefault(r["size"], []).append(r)
    return by_size


def load(gpus, collective, directory, compression=None):
    """A run's rows from an earlier --out directory, by size."""
    tag = f"{gpus}-{collective}" + (f"-{compression}" if compression else "")
    path = os.path.join(directory, f"sim-{tag}.json")
    if not os.path.exists(path):
        return {}
    by_size = {}
    for r in json.load(open(path))["rows"]:
        by_size.setdefault(r["size"], []).append(r)
    return by_size


def factor_of(sizes):
    """The step between a run's sizes."""
    return sorted(sizes)[1] // sorted(sizes)[0] if len(sizes) > 1 else 2


def resimulate(gpus, collective, args, plain):
    """plain's rows, with those of --resimulate's algorithms (where they ran) simulated again; the merged
    run is written to --out like a fresh one."""
    ran = {r["algorithm"] for rows in plain.values() for r in rows}
    wanted = [a for a in args.resimulate.split(",") if a in ran]
    if not wanted:
        return plain
    # Read before the run, which writes the same name when --out is --plain-from.
    with open(os.path.join(args.plain_from, f"sim-{gpus}-{collective}.json")) as f:
        document = json.load(f)
    fresh = run(gpus, collective, args.preset, args.out, args.j, factor=factor_of(plain),
                algorithms=",".join(wanted))
    merged = {}
    for size, rows in plain.items():
        new = {r["algorithm"]: r for r in fresh.get(size, [])}
        merged[size] = [dict(new[r["algorithm"]], selected=r["selected"]) if r["algorithm"] in new else r
                        for r in rows]
    document["rows"] = [r for size in sorted(merged) for r in merged[size]]
    for r in document["rows"]:
        r["best"] = r["time_us"] == min(x["time_us"] for x in merged[r["size"]])
    with open(os.path.join(args.out, f"sim-{gpus}-{collective}.json"), "w") as f:
        json.dump(document, f, indent=1)
    return merged


def selector_view(gpus, collective, preset, sizes, sim=SIM):
    """Per size, the selector's pick and the cost model's prediction (us) of every algorithm that applies
    (fairway-sim --picks: nothing simulated)."""
    cmd = [sim, "--preset", preset, "--nodes", str(max(1, gpus // 8)), "--ranks-per-node", str(min(8, gpus)),
           "-c", collective, "-b", str(min(sizes)), "-e", str(max(sizes)),
           "-f", str(factor_of(sizes)), "--picks"]
    view = {}
    for line in subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines():
        if line and not line.startswith("#"):
            model = {a: float(us) for a, us in re.findall(r"(\w+)=([0-9.]+)", line)}
            view[int(line.split()[0])] = (line.split()[1], model)
    return view


def model_ratios(view, plain):
    """Per size, each algorithm's cost-model prediction (selector_view) over its simulated time."""
    return {size: " ".join(f"{r['algorithm']} {model[r['algorithm']] / r['time_us']:.2f}"
                           for r in plain.get(size, []) if r["algorithm"] in model)
            for size, (_, model) in view.items()}


def human(size):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale:
            return f"{size // scale}{unit}"
    return str(size)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="8,64,256,1024")
    ap.add_argument("--preset", default="h100-ndr400")
    ap.add_argument("--collectives", default=",".join(COLLECTIVES))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "sim-crossovers"))
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--compressed-up-to", type=int, default=256,
                    help="compressed runs only up to this many GPUs (compressed flat's all-to-all grows as n^2)")
    ap.add_argument("--factor", type=int, default=4, help="size step from 1 MiB to 1 GiB")
    ap.add_argument("--algorithms", default=None,
                    help="only these plain algorithms (fairway-sim -a), for the largest clusters; the pick "
                         "must be among them for its row to count")
    ap.add_argument("--plain-from", default=None,
                    help="reuse the simulated times of an earlier --out directory (they do not depend on the "
                         "selector): the pick is this build's (--picks), 'before' the pick recorded there")
    ap.add_argument("--resimulate", default=None,
                    help="with --plain-from: simulate these algorithms again (their code changed) and use their "
                         "new times with the others' old ones; the merged JSON goes to --out")
    ap.add_argument("--no-before", action="store_true", help="skip the 'before' picks (the largest clusters)")
    ap.add_argument("--before-sim", default=SIM,
                    help="the fairway-sim whose selector gives the 'before' picks (with --model-rails 1)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    lines = ["| GPUs | collective | size | fastest (busbw GB/s) | selector's pick | pick vs fastest | "
             "pick before | vs fastest | int8 compressed: fastest | compressed vs plain |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    model_lines = ["| GPUs | collective | size | model / simulated, per algorithm |", "|---|---|---|---|"]
    before_misses = 0
    misses = 0
    for gpus in [int(g) for g in args.gpus.split(",")]:
        for collective in args.collectives.split(","):
            if args.plain_from:
                plain = load(gpus, collective, args.plain_from)
                if not plain:
                    continue
                if args.resimulate:
                    plain = resimulate(gpus, collective, args, plain)
                view = selector_view(gpus, collective, args.preset, list(plain))
                old = {size: [dict(r) for r in rows if r["selected"]] for size, rows in plain.items()}
                plain = {size: [dict(r, selected=r["algorithm"] == view[size][0]) for r in rows]
                         for size, rows in plain.items()}
                compressed = load(gpus, collective, args.plain_from, "int8")
            else:
                plain = run(gpus, collective, args.preset, args.out, args.j, factor=args.factor,
                            algorithms=args.algorithms)
                view = selector_view(gpus, collective, args.preset, list(plain))
            # The picks before: another build's selector (--before-sim), told of one NIC per node as it assumed.
            if not args.plain_from:
                old = {} if args.no_before else run(gpus, collective, args.preset, args.out, args.j,
                                                    extra=("--selected", "--model-rails", "1"),
                                                    sim=args.before_sim, factor=args.factor)
                compressed = (run(gpus, collective, args.preset, args.out, args.j, "int8", factor=args.factor)
                              if collective != "allgather" and gpus <= args.compressed_up_to else {})
            ratios = model_ratios(view, plain)
            for size in sorted(plain):
                model_lines.append(f"| {gpus} | {collective} | {human(size)} | {ratios.get(size, '-')} |")
            for size in sorted(plain):
                rows = plain[size]
                best = min(rows, key=lambda r: r["time_us"])
                pick = next((r for r in rows if r["selected"]), None)
                slow = pick["time_us"] / best["time_us"] - 1 if pick else float("nan")
                mark = " **>10%**" if slow > 0.10 else ""
                misses += 1 if slow > 0.10 else 0
                old_pick = next((r for r in old.get(size, []) if r["selected"]), None)
                old_row = next((r for r in rows if old_pick and r["algorithm"] == old_pick["algorithm"]), None)
                old_slow = old_row["time_us"] / best["time_us"] - 1 if old_row else float("nan")
                before_misses += 1 if old_slow > 0.10 else 0
                old_text = (f"{old_row['algorithm']} | {100 * old_slow:+.0f}%" + (" **>10%**" if old_slow > 0.10 else "")
                            if old_row else "? | ?")
                comp = compressed.get(size, [])
                cbest = min(comp, key=lambda r: r["time_us"]) if comp else None
                ctext = (f"{cbest['algorithm']} ({cbest['busbw_gbps']:.1f})" if cbest else "-")
                gain = f"{best['time_us'] / cbest['time_us']:.2f}x" if cbest else "-"
                lines.append(f"| {gpus} | {collective} | {human(size)} | {best['algorithm']} "
                             f"({best['busbw_gbps']:.1f}) | {pick['algorithm'] if pick else '?'} | "
                             f"{100 * slow:+.0f}%{mark} | {old_text} | {ctext} | {gain} |")
    summary = (f"points where the selector's pick is more than 10% slower than the fastest: {misses} "
               f"(before: {before_misses})")
    report = ("\n".join(lines) + "\n\n" + summary + "\n\nThe selector's cost model against the simulator "
              "(its prediction over the simulated time):\n\n" + "\n".join(model_lines) + "\n")
    print(report)
    with open(os.path.join(args.out, "crossovers.md"), "w") as f:
        f.write(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
