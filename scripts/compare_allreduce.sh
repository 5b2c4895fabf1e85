#!/usr/bin/env bash
# Side-by-side float32 allreduce busbw: Fairway's all_reduce_perf against
# Open MPI's MPI_Allreduce over UCX, same ranks, same machine, same run.
# Runs alternate between the two REPEATS times per rank count; the table
# reports each size's median busbw (out-of-place) and the ratio. Both bind
# rank r to core r mod cores (fairwayrun's default; mpirun is asked to,
# since it stops binding when ranks outnumber cores).
#   usage: scripts/compare_allreduce.sh [REPEATS] [RANK COUNTS...]
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-5}
shift || true
rank_counts=("$@")
[ ${#rank_counts[@]} -eq 0 ] && rank_counts=(2 4)
bin=build/bin
[ -x "$bin/mpi_all_reduce_perf" ] || { echo "build/bin/mpi_all_reduce_perf missing: run scripts/setup.sh" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Iterations shrink as sizes grow so that every timed window lasts tens of
# milliseconds: on shared cores a window of a few milliseconds measures the
# scheduler, not the library. Both libraries get the same settings.
sweeps=("-b 65536 -e 1048576 -f 2 -n 400 -w 20"
        "-b 2097152 -e 8388608 -f 2 -n 60 -w 5"
        "-b 16777216 -e 67108864 -f 2 -n 10 -w 2")
for np in "${rank_counts[@]}"; do
  for rep in $(seq "$repeats"); do
    for sweep in "${sweeps[@]}"; do
      # shellcheck disable=SC2086
      "$bin/fairwayrun" -np "$np" "$bin/all_reduce_perf" $sweep -c 0 \
        | awk -v np="$np" '!/^#/ && NF >= 8 {print "fairway", np, $1, $8}' >> "$out/raw"
      # shellcheck disable=SC2086
      mpirun -np "$np" --oversubscribe --bind-to core:overload-allowed --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
        "$bin/mpi_all_reduce_perf" $sweep 2>/dev/null \
        | awk -v np="$np" '!/^#/ && NF >= 8 {print "ompi", np, $1, $8}' >> "$out/raw"
    done
  done
done
python3 - "$out/raw" "$repeats" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    lib, np, size, busbw = line.split()
    rows[(int(np), int(size), lib)].append(float(busbw))
print(f"# float32 sum allreduce, out-of-place busbw (GB/s), median of {sys.argv[2]} runs each")
print(f"{'ranks':>5} {'size':>10} {'fairway':>9} {'ompi':>9} {'ratio':>7}")
for np, size in sorted({(k[0], k[1]) for k in rows}):
    f = statistics.median(rows[(np, size, 'fairway')])
    o = statistics.median(rows[(np, size, 'ompi')])
    print(f"{np:>5} {size:>10} {f:>9.2f} {o:>9.2f} {f / o:>7.2f}")
PY
