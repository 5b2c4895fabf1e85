#!/usr/bin/env bash
# Flat ring versus two-phase, allreduce and reduce-scatter, on an emulated
# cluster (scripts/emulate_cluster.sh, root only): NODES x PER_NODE ranks,
# each node's link limited to RATE. Runs every (collective, algorithm)
# REPEATS times, interleaved, and prints the median out-of-place busbw per
# size, the two-phase/ring ratio, and the link-limited busbw bound: a
# node's link carries (M-1)/M of the buffer each way for reduce-scatter
# and twice that for allreduce, so both bounds are R * M/(M-1) * (n-1)/n.
# tbf counts each frame's headers against R, so the payload can use at most
# (MTU - 52) / (MTU + 14) of it (IP, TCP with timestamps, Ethernet): the
# table also gives that bound.
# 1 MiB to 16 MiB run 20 timed iterations, larger sizes 3.
# Results are checked element by element in the first repeat only (the
# check of 256 MiB on 8 ranks takes minutes on a small machine and does not
# change the timings); #wrong counts those checks.
#
#   sudo scripts/bench_two_phase.sh [REPEATS] [NODES] [PER_NODE] [RATE_GBIT] [MAX_SIZE] [COLLECTIVES] [MTU]
# COLLECTIVES: "all_reduce reduce_scatter" (the default) or either one.
set -uo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-3} nodes=${2:-2} per_node=${3:-4} rate=${4:-2} max=${5:-256M} colls=${6:-all_reduce reduce_scatter} mtu=${7:-9000}
bin=build/bin
if [ "$(id -u)" -ne 0 ]; then
  echo "$0: needs root for the emulated cluster; skipped"
  exit 0
fi
max_bytes=$(numfmt --from=iec "$max")
# Iterations shrink as sizes grow, so that every timed window lasts about
# half a second or more at a few Gbit/s: a window of a few milliseconds
# measures the scheduler and the qdisc's burst, not the algorithm.
ranges=("1048576 16777216 20 2" "67108864 1099511627776 3 1")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((i = 1; i <= repeats; i++)); do
  for coll in $colls; do
    short=${coll/_/}
    for algo in ring twophase; do
      : > "$out/$coll.$algo.$i"
      for range in "${ranges[@]}"; do
        read -r lo hi iters warm <<< "$range"
        (( hi > max_bytes )) && hi=$max_bytes
        (( lo > hi )) && continue
        scripts/emulate_cluster.sh -n "$nodes" -r "$per_node" -b "${rate}gbit" -m "$mtu" -x FAIRWAY_ALGO="${short}:${algo}" -- \
          "$bin/${coll}_perf" -b "$lo" -e "$hi" -f 4 -n "$iters" -w "$warm" -c $((i == 1)) >>"$out/$coll.$algo.$i" 2>&1 ||
          { echo "$0: $coll with $algo failed:"; cat "$out/$coll.$algo.$i"; exit 1; }
      done
    done
  done
  echo "# repeat $i of $repeats done" >&2
done
python3 - "$out" "$repeats" "$nodes" "$per_node" "$rate" "$colls" "$mtu" <<'PY'
import statistics, sys, glob
out, repeats, M, D, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
colls, mtu = sys.argv[6].split(), int(sys.argv[7])
n = M * D
bound = rate / 8 * M / (M - 1) * (n - 1) / n
payload = bound * (mtu - 52) / (mtu + 14)
def table(path, factor):
    # busbw from the time column: the printed busbw has only two decimals.
    rows = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 13 and f[0].isdigit():
            rows[int(f[0])] = (int(f[0]) / float(f[5]) / 1e3 * factor, int(f[8]) + int(f[12]))
    return rows
for coll in colls:
    factor = (2.0 if coll == "all_reduce" else 1.0) * (n - 1) / n
    runs = {a: [table(f"{out}/{coll}.{a}.{i}", factor) for i in range(1, repeats + 1)] for a in ("ring", "twophase")}
    print(f"\n{coll}: {M} nodes x {D} ranks, {rate:g} Gbit/s links, MTU {mtu}, out-of-place busbw GB/s, "
          f"median of {repeats}; link-limited bound {bound:.3f}, {payload:.3f} after headers")
    print("| size | ring | two-phase | two-phase / ring | two-phase / bound | two-phase / bound after headers | #wrong |")
    print("|---|---|---|---|---|---|---|")
    for size in sorted(runs["ring"][0]):
        ring = statistics.median(r[size][0] for r in runs["ring"])
        two = statistics.median(r[size][0] for r in runs["twophase"])
        wrong = sum(r[size][1] for a in runs for r in runs[a])
        print(f"| {size >> 20} MiB | {ring:.3f} | {two:.3f} | {two / ring:.2f} | {two / bound:.2f} | {two / payload:.2f} "
              f"| {wrong} |")
PY
