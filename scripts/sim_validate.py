#!/usr/bin/env python3
"""fairway-sim against the emulated cluster: measured and predicted busbw.

    sudo scripts/sim_validate.py [--rounds 3] [--layouts 2x4,4x2,2x2] [--out DIR]

For each layout (nodes x ranks per node) and algorithm (ring, two-phase,
leaders, and two-phase compressed to int8; on one node, 1xD, the
shared-memory segment, ring and Rabenseifner), runs all_reduce_perf on the
emulated cluster at 1 Gbit/s (scripts/emulate_cluster.sh) with the
algorithm forced by FAIRWAY_ALGO, from 64 KiB to 64 MiB, `rounds` times
interleaved, and takes the median time of each size; then runs fairway-sim
with the emulated-1g preset on the same layout and algorithm. Prints one
table with both busbw columns and the prediction's error, and writes it
with the raw JSON to DIR. Needs root (network namespaces), as the cluster does.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")
ALGORITHMS = [  # (name in the table, FAIRWAY_ALGO's algorithm, compression)
    ("ring", "ring", None),
    ("twophase", "twophase", None),
    ("leaders", "leaders", None),
    ("compressed_twophase int8", "compressed_twophase", "int8"),
]
# One node (a layout 1xD): the node's shared-memory segment (what the
# selector picks there) and the flat algorithms over the node's transport.
ONE_NODE_ALGORITHMS = [
    ("shm", "shm", None),
    ("ring", "ring", None),
    ("rabenseifner", "rabenseifner", None),
]


def algorithms_for(nodes):
    return ONE_NODE_ALGORITHMS if nodes == 1 else ALGORITHMS
SIZES = "-b 64K -e 64M -f 4".split()


def measure(nodes, per_node, algo, compression, path):
    cmd = [os.path.join(ROOT, "scripts", "emulate_cluster.sh"), "-n", str(nodes), "-r", str(per_node),
           "-b", "1gbit", "-x", "FAIRWAY_ALGO=allreduce:" + algo, "-x", "FAIRWAY_TIMEOUT_MS=60000", "--",
           os.path.join(BIN, "all_reduce_perf"), *SIZES, "-n", "5", "-w", "1", "-d", "float", "-J", path]
    if compression:
        cmd += ["-q", compression]
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if run.returncode != 0:
        sys.exit("measurement failed: " + " ".join(cmd) + "\n" + run.stdout[-3000:])
    with open(path) as f:
        return {r["size"]: r["out_of_place"]["time_us"] for r in json.load(f)["rows"]}


def predict(nodes, per_node, algo, compression, path):
    cmd = [os.path.join(BIN, "fairway-sim"), "--preset", "emulated-1g", "--nodes", str(nodes),
           "--ranks-per-node", str(per_node), "-c", "allreduce", "-a", algo, *SIZES, "-J", path, "-j", "1"]
    if compression:
        cmd += ["-q", compression]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(path) as f:
        return {r["size"]: r["time_us"] for r in json.load(f)["rows"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--layouts", default="2x4,4x2,2x2")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "sim-validation"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("sim_validate: the emulated cluster needs root (network namespaces); skipped")
        return 0
    os.makedirs(args.out, exist_ok=True)
    layouts = [tuple(int(x) for x in l.split("x")) for l in args.layouts.split(",")]
    measured = {}
    for rnd in range(args.rounds):  # interleaved: every case once per round
        for nodes, per_node in layouts:
            for name, algo, comp in algorithms_for(nodes):
                path = os.path.join(args.out, f"measured-{nodes}x{per_node}-{algo}-{rnd}.json")
                for size, t in measure(nodes, per_node, algo, comp, path).items():
                    measured.setdefault((nodes, per_node, name, size), []).append(t)
                print(f"round {rnd + 1}/{args.rounds}: {nodes}x{per_node} {name} measured", flush=True)
    lines = ["| layout | algorithm | size | measured busbw (GB/s) | predicted busbw (GB/s) | error |",
             "|---|---|---|---|---|---|"]
    worst = 0.0
    for nodes, per_node in layouts:
        n = nodes * per_node
        factor = 2.0 * (n - 1) / n
        for name, algo, comp in algorithms_for(nodes):
            predicted = predict(nodes, per_node, algo, comp,
                                os.path.join(args.out, f"predicted-{nodes}x{per_node}-{algo}.json"))
            for size in sorted(predicted):
                times = measured.get((nodes, per_node, name, size))
                if not times:
                    continue
                real = statistics.median(times)
                bus_real = size / (real * 1e3) * factor
                bus_sim = size / (predicted[size] * 1e3) * factor
                error = (bus_sim - bus_real) / bus_real
                if size >= 1 << 20:
                    worst = max(worst, abs(error))
                lines.append(f"| {nodes}x{per_node} | {name} | {size} | {bus_real:.4f} | {bus_sim:.4f} | "
                             f"{100 * error:+.1f}% |")
    table = "\n".join(lines)
    print(table)
    print(f"\nlargest error from 1 MiB: {100 * worst:.1f}%")
    with open(os.path.join(args.out, "validation.md"), "w") as f:
        f.write(table + f"\n\nlargest error from 1 MiB: {100 * worst:.1f}%\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
