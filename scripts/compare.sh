#!/usr/bin/env bash
# Side by side, same ranks, same machine, same run: Fairway's perf binaries,
# Open MPI's MPI collectives over UCX (build/bin/mpi_perf under mpirun),
# Intel oneCCL over Intel MPI's shared memory (scripts/oneccl_peer.sh, which
# installs it from PyPI into .peers/oneccl) and Gloo over TCP
# (build/bin/gloo_perf under fairwayrun), float32 (or with -d bfloat16,
# Fairway, oneCCL and NCCL alone: MPI and Gloo have no such type) sum. With
# -m cuda, Fairway runs on device buffers and NCCL's own collectives
# (build/bin/nccl_perf, one GPU per rank) join; Open MPI and Gloo stay on
# host buffers (Debian's Open MPI is not CUDA-aware), as does oneCCL. With
# -m mappable, Fairway's host buffers come from fwHostMemAlloc, which the
# node's peers map (the peers keep their own host buffers). The libraries
# alternate REPEATS times for every rank count, collective and size range;
# out-of-place busbw per size is the median.
# With -B BIN the peer is another Fairway build instead (BIN: its bin/
# directory, e.g. one of the commit before a change): the before/after
# check of a change, interleaved the same way; a rank count of 1 reports
# algbw (busbw has no meaning there).
# Writes OUTDIR/compare.md (busbw and Fairway/peer ratios) and
# OUTDIR/compare.png (busbw against size, one panel per collective and
# rank count), and prints the table.
#
#   scripts/compare.sh [-r REPEATS] [-n "RANKS ..."] [-c "COLLECTIVES ..."] [-b MIN] [-e MAX] [-m host|mappable|cuda]
#                      [-d float|bfloat16] [-i] [-p "PEERS ..."] [-B BEFORE_BIN] [-N ITERS] [-o OUTDIR]
#   defaults: -r 3 -n "2 4" -c "allreduce reducescatter allgather" -b 4K -e 64M -m host -d float
#             -p "ompi oneccl gloo" -o compare-results (-c also takes broadcast, from rank 0, and alltoall)
#   -i: every library in place (Fairway's in-place timings, MPI_IN_PLACE, oneCCL's
#       one-buffer calls); Gloo and NCCL are compared out of place only
#   -N ITERS: every library times ITERS calls at every size (a tenth as many
#       warm-up calls, at least 1) instead of the counts chosen per size below:
#       for a quick look or a test of the script; windows that short measure
#       the scheduler as much as the library
#   FAIRWAY_BIN: the build's bin directory (default build/bin)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=3 ranks="2 4" colls="allreduce reducescatter allgather" min=4K max=64M memory=host outdir=compare-results
before="" peers="ompi oneccl gloo" dtype=float inplace=0 fixed_iters=""
while getopts "r:n:c:b:e:m:d:ip:B:N:o:h" flag; do
  case $flag in
    r) repeats=$OPTARG ;; n) ranks=$OPTARG ;; c) colls=$OPTARG ;;
    b) min=$OPTARG ;; e) max=$OPTARG ;; m) memory=$OPTARG ;; d) dtype=$OPTARG ;; i) inplace=1 ;;
    p) peers=$OPTARG ;; B) before=$OPTARG ;; N) fixed_iters=$OPTARG ;; o) outdir=$OPTARG ;;
    *) sed -n '2,33p' "$0"; exit 2 ;;
  esac
done
case $memory in host|mappable|cuda) ;; *) echo "$0: -m $memory: expected host, mappable or cuda" >&2; exit 2 ;; esac
case $dtype in float|bfloat16) ;; *) echo "$0: -d $dtype: expected float or bfloat16" >&2; exit 2 ;; esac
[[ -z "$fixed_iters" || "$fixed_iters" =~ ^[1-9][0-9]*$ ]] || { echo "$0: -N $fixed_iters: expected a whole number of at least 1" >&2; exit 2; }
bytes() { numfmt --from=iec "$1"; }
min=$(bytes "$min") max=$(bytes "$max")
bin=${FAIRWAY_BIN:-build/bin}  # where the binaries are (another build directory's bin/)
needed="fairwayrun all_reduce_perf reduce_scatter_perf all_gather_perf broadcast_perf alltoall_perf copy_bandwidth"
for p in $peers; do
  case $p in ompi|oneccl|gloo) ;; *) echo "$0: -p: unknown peer $p (ompi, oneccl, gloo)" >&2; exit 2 ;; esac
done
[ -n "$before" ] && peers=""
# MPI and Gloo have no bfloat16: with -d bfloat16 they leave the table,
# as Gloo does with -i; the table says why.
left=""
for p in ompi gloo; do
  [[ " $peers " == *" $p "* ]] || continue
  if [ "$dtype" != float ]; then
    left="$left $p:it_has_no_${dtype}_type"
  elif [ "$p" = gloo ] && [ "$inplace" = 1 ]; then
    left="$left $p:it_is_compared_out_of_place_only"
  else
    continue
  fi
  peers=${peers/$p/}
done
has_peer() { [[ " $peers " == *" $1 "* ]]; }
has_peer ompi && needed="$needed mpi_perf"
has_peer gloo && needed="$needed gloo_perf"
for b in $needed; do
  [ -x "$bin/$b" ] || { echo "$0: $bin/$b is missing: run scripts/setup.sh (it installs Open MPI and Gloo)" >&2; exit 1; }
done
if [ -n "$before" ]; then
  for b in fairwayrun all_reduce_perf reduce_scatter_perf all_gather_perf broadcast_perf alltoall_perf; do
    [ -x "$before/$b" ] || { echo "$0: -B $before: $before/$b is missing" >&2; exit 1; }
  done
fi
for c in $colls; do
  case $c in allreduce|reducescatter|allgather|broadcast|alltoall) ;; *) echo "$0: unknown collective $c" >&2; exit 2 ;; esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$outdir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
raw=$work/raw notes=$work/notes
: > "$notes"
for p in $left; do
  why=${p#*:}
  echo "$([ "${p%%:*}" = ompi ] && echo "Open MPI" || echo Gloo): not run: ${why//_/ }" >> "$notes"
done
: > "$work/copy" > "$work/copy-all"
[ -n "$fixed_iters" ] && echo "every library timed $fixed_iters calls a size (-N $fixed_iters): windows this short measure the scheduler as much as the library" >> "$notes"

# -m cuda: Fairway must have a GPU (its refusal says why); NCCL runs on a
# rank count only where it has a GPU per rank, else the table says why not.
if [ "$memory" = cuda ]; then
  if ! "$bin/fairwayrun" -np 1 "$bin/all_reduce_perf" -m cuda -b 8 -e 8 -n 1 -w 0 -c 0 > /dev/null 2> "$work/why"; then
    echo "$0: -m cuda: $(grep -m1 -- '-m cuda' "$work/why" || tail -n1 "$work/why")" >&2
    exit 2
  fi
fi
# oneCCL: installed (once) and built here; where that fails the table says why.
if has_peer oneccl && ! bash scripts/oneccl_peer.sh install > /dev/null 2> "$work/why"; then
  echo "oneCCL: not run: scripts/oneccl_peer.sh install failed: $(tail -n1 "$work/why")" >> "$notes"
  peers=${peers/oneccl/}
fi
has_peer oneccl && echo "oneCCL $(sed -n 's/^oneccl-cpu \([^,]*\),.*/\1/p' .peers/oneccl/stamp) over Intel MPI's shared memory (CCL_ATL_TRANSPORT=mpi, I_MPI_FABRICS=shm), blocking collectives (CCL_ATL_SYNC_COLL=${CCL_ATL_SYNC_COLL:-1}), one worker a rank" >> "$notes"
nccl_runs_on() {  # $1 ranks; records the reason when it cannot
  [ "$memory" = cuda ] || return 1
  if [ "$inplace" = 1 ]; then
    echo "NCCL on $1 ranks: not run: it is compared out of place only" >> "$notes"
    return 1
  fi
  if [ ! -x "$bin/nccl_perf" ]; then
    echo "NCCL on $1 ranks: not run: nccl_perf was not built (no NCCL found at build time)" >> "$notes"
    return 1
  fi
  local store
  store=$(mktemp -d -p "$work")
  if ! "$bin/fairwayrun" -np "$1" -x PEER_STORE_DIR="$store" "$bin/nccl_perf" -b 8 -e 8 -n 1 -w 0 > /dev/null 2> "$work/why"; then
    echo "NCCL on $1 ranks: not run: $(grep -m1 '^nccl_perf:' "$work/why" || tail -n1 "$work/why")" >> "$notes"
    return 1
  fi
}

fairway_binary() {
  case $1 in
    allreduce) echo all_reduce_perf ;; reducescatter) echo reduce_scatter_perf ;; allgather) echo all_gather_perf ;;
    broadcast) echo broadcast_perf ;; alltoall) echo alltoall_perf ;;
  esac
}
# Iterations shrink as sizes and rank counts grow so that every timed
# window lasts about 10 ms or more for the fastest library on 2 ranks, and
# longer elsewhere: on shared cores a window of a few milliseconds
# measures the scheduler, not the library (one 2-rank allgather of
# 128 KiB, 500 iterations or 2.5 ms, read 5.0 to 8.9 us across six
# repeats). Fairway, NCCL and Open MPI run the same iterations; Gloo, 10
# to 400 times slower below 1 MiB, runs fewer (the last column), and its
# windows are still the longest.
# Each range: smallest, largest size, iterations and warm-up on 2 ranks
# (on n ranks, 2/n of them, at least 8 and 2), Gloo's iterations.
ranges=("8 2048 50000 1000 100" "4096 65536 20000 400 100" "131072 1048576 5000 100 50"
        "2097152 8388608 400 10 10" "16777216 1073741824 20 2 4")
# Per rank count: a call takes about n/2 times as long on n ranks.
scaled() { local v=$(( $1 * 2 / $2 )); (( v < $3 )) && v=$3; echo "$v"; }
# Columns of the perf output: size is $1, out-of-place time (us) is $6;
# busbw is computed from the time (the printed one has two decimals).
# Fairway's binaries also time the call in place ($10; N/A where the
# collective has none), recorded as LIB-inplace.
# Rows only: oneCCL writes its warnings to standard output.
collect() {
  awk -v lib="$1" -v np="$2" -v c="$3" '$1 ~ /^[0-9]+$/ && NF >= 8 {
    print lib, np, c, $1, $6
    if (NF >= 12 && $10 ~ /^[0-9.]+$/) print lib "-inplace", np, c, $1, $10
  }' >> "$raw"
}

for np in $ranks; do
  with_nccl=false
  [ -z "$before" ] && nccl_runs_on "$np" && with_nccl=true
  for rep in $(seq "$repeats"); do
    # The yardstick for shared-memory collectives: one core's memcpy of 64
    # MiB; and every core's at once, what each gets when all copy. Only the
    # host table against the peers has a bound to compare with.
    if [ "$memory" != cuda ] && [ -z "$before" ]; then
      "$bin/copy_bandwidth" 64M >> "$work/copy"
      for core in $(seq 0 $(( $(nproc) - 1 ))); do taskset -c "$core" "$bin/copy_bandwidth" 64M >> "$work/copy-all" & done
      wait
    fi
    for c in $colls; do
      for r in "${ranges[@]}"; do
        read -r lo hi iters warm glooIters <<< "$r"
        iters=$(scaled "$iters" "$np" 8) warm=$(scaled "$warm" "$np" 2)
        if [ -n "$fixed_iters" ]; then
          iters=$fixed_iters warm=$(( fixed_iters / 10 > 0 ? fixed_iters / 10 : 1 )) glooIters=$fixed_iters
        fi
        (( lo < min )) && lo=$min
        (( hi > max )) && hi=$max
        (( lo > hi )) && continue
        sweep="-d $dtype -b $lo -e $hi -f 2 -n $iters -w $warm"
        peer_sweep="$sweep -I $inplace"
        # shellcheck disable=SC2086
        "$bin/fairwayrun" -np "$np" "$bin/$(fairway_binary "$c")" $sweep -c 0 -m "$memory" | collect fairway "$np" "$c"
        if [ -n "$before" ]; then
          # shellcheck disable=SC2086
          "$before/fairwayrun" -np "$np" "$before/$(fairway_binary "$c")" $sweep -c 0 -m "$memory" |
            collect before "$np" "$c"
          continue
        fi
        if $with_nccl; then
          store=$(mktemp -d -p "$work")
          # shellcheck disable=SC2086
          "$bin/fairwayrun" -np "$np" -x PEER_STORE_DIR="$store" "$bin/nccl_perf" -C "$c" $sweep | collect nccl "$np" "$c"
        fi
        if has_peer ompi; then
          # shellcheck disable=SC2086
          mpirun -np "$np" --oversubscribe --bind-to core:overload-allowed --mca pml ucx --mca pml_ucx_tls any \
            --mca pml_ucx_devices any "$bin/mpi_perf" -C "$c" $sweep 2>/dev/null | collect ompi "$np" "$c"
        fi
        if has_peer oneccl; then
          # shellcheck disable=SC2086
          bash scripts/oneccl_peer.sh run "$np" -C "$c" $sweep 2>/dev/null | collect oneccl "$np" "$c"
        fi
        if has_peer gloo; then
          # Gloo's TCP transport runs a helper thread per rank: bound to the
          # rank's one core it would wait a scheduler slice per message.
          store=$(mktemp -d -p "$work")
          # shellcheck disable=SC2086
          "$bin/fairwayrun" -np "$np" --bind none -x PEER_STORE_DIR="$store" "$bin/gloo_perf" -C "$c" \
            -b "$lo" -e "$hi" -f 2 -n "$glooIters" -w 2 | collect gloo "$np" "$c"
        fi
      done
    done
    echo "# $np ranks: repeat $rep of $repeats done" >&2
  done
done

python3 - "$raw" "$notes" "$repeats" "$memory" "$outdir" "$work/copy" "$before" "$peers" "$(nproc)" "$dtype" "$inplace" "$work/copy-all" <<'PY'
import collections, statistics, sys
raw, notes, repeats, memory, outdir, copies, before, chosen, cores, dtype, in_place_run, copies_all = sys.argv[1:]
in_place_run = in_place_run == "1"
cores = int(cores)
runs = collections.defaultdict(list)
def bus_factor(coll, n):  # nccl-tests' formulas; one rank: algbw
    if n == 1 or coll == "broadcast":
        return 1.0
    return (2.0 if coll == "allreduce" else 1.0) * (n - 1) / n
for line in open(raw):
    lib, np, coll, size, time_us = line.split()
    # -i: Fairway's in-place timings are its column; its out-of-place ones go.
    if in_place_run and lib.endswith("-inplace"):
        lib = lib[:-len("-inplace")]
    elif in_place_run and lib in ("fairway", "before"):
        continue
    busbw = int(size) / float(time_us) / 1e3 * bus_factor(coll, int(np))
    runs[(coll, int(np), int(size), lib)].append(busbw)
names = {"fairway": "Fairway", "nccl": "NCCL", "ompi": "Open MPI", "oneccl": "oneCCL", "gloo": "Gloo",
         "before": "before", "fairway-inplace": "Fairway in place"}
# The memory bound (docs/performance.md, "The memory bound"): a rank must
# read its input and write its output once, N times these bytes for the
# nccl-tests size N (a broadcast's root, out of place, both; every other
# rank writes N); one core moves 2B bytes a second doing so, B being its
# memcpy rate (a copy reads and writes each byte), and with more ranks
# than cores each core serves n / cores of them. Bound busbw = bus factor
# x N / time.
# In place an allgather's own block and a broadcast's root stay put.
def traffic(coll, n):
    if in_place_run and coll in ("allgather", "broadcast"):
        return 1.0
    return {"allreduce": 2.0, "reducescatter": 1 + 1 / n, "allgather": 1 + 1 / n, "broadcast": 2.0,
            "alltoall": 2.0}[coll]
def bound(coll, n, copy):
    return bus_factor(coll, n) * 2 * copy / traffic(coll, n) / max(1.0, n / cores)
BOUND_FROM = 4 << 20  # past a core's share of L2; the copy yardstick itself may run in a large L3
inplace = ["fairway-inplace"] if memory != "cuda" and not before and not in_place_run else []
libs = (["fairway"] + inplace + (["nccl"] if memory == "cuda" and not before else []) +
        (["before"] if before else [p for p in ("ompi", "oneccl", "gloo") if p in chosen.split()]))
peers = libs[1 + len(inplace):]
# The CPU libraries Fairway is to lead: the best of them per size.
cpu_peers = [p for p in ("ompi", "oneccl") if p in libs]
def human(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"
where = ("Fairway and NCCL on device buffers, Open MPI and Gloo on host buffers" if memory == "cuda"
         else "host buffers (Fairway's from fwHostMemAlloc)" if memory == "mappable" else "host buffers")
peers_text = (f"Fairway of this build against the build in {before}" if before
              else ", ".join({"ompi": "Open MPI over UCX", "oneccl": "oneCCL over Intel MPI", "gloo": "Gloo over TCP"}[p]
                             for p in peers))
lines = [f"{'float32' if dtype == 'float' else dtype} sum, {where}, out-of-place busbw GB/s (nccl-tests formulas; algbw on 1 rank), median of "
         f"{repeats} interleaved runs per library; {peers_text}", ""]
if in_place_run:
    lines[0] = lines[0].replace("out-of-place busbw", "in-place busbw")
lines += [f"- {note.strip()}" for note in open(notes) if note.strip()]
copy_rates = [float(line.split()[1]) for line in open(copies) if line.strip()]
copy = statistics.median(copy_rates) if copy_rates and memory != "cuda" and not before else None
if copy:
    note = f"single-core memcpy of 64 MiB: {copy:.2f} GB/s (median of {len(copy_rates)}, one per repeat)"
    ar = [float(l.split()[4]) for l in open(raw) if l.split()[:4] == ["fairway", "2", "allreduce", str(64 << 20)]]
    if ar:
        busbw = statistics.median((64 << 20) / t / 1e3 for t in ar)
        note += f"; Fairway's 2-rank 64 MiB allreduce busbw {busbw:.2f} GB/s is {100 * busbw / copy:.0f}% of it"
    lines.append(f"- {note}")
    loaded = [float(line.split()[1]) for line in open(copies_all) if line.strip()]
    if loaded:
        lines.append(f"- with all {cores} cores copying at once, each one's memcpy of 64 MiB: "
                     f"{statistics.median(loaded):.2f} GB/s (median of {len(loaded)})")
    lines.append(f"- bound: the busbw at which each rank reads its input and writes its output once at that "
                 f"memcpy rate, its {cores} cores shared among the ranks (docs/performance.md, \"The memory "
                 f"bound\"); Fairway's fraction of it from {human(BOUND_FROM)}, past a core's share of L2 (over 1 where "
                 f"a buffer runs faster in L3 than the 64 MiB copy)")
if in_place_run:
    lines.append("- in place: Fairway's perf binaries' in-place calls, Open MPI's with MPI_IN_PLACE, oneCCL's with "
                 "one buffer (each rank's block at its offset in the whole, as NCCL defines in place)")
if inplace:
    lines.append("- Fairway in place: the same calls with the result written over the input. Open MPI's and "
                 "oneCCL's broadcast have one buffer, so they are in place, and their broadcast tables compare "
                 "Fairway in place with them too; the peers' other calls run out of place")
if lines[-1] != "":
    lines.append("")
data = open(f"{outdir}/compare.dat", "w")
order = ["allreduce", "reducescatter", "allgather", "broadcast", "alltoall"]
panels = sorted({(c, np) for c, np, _, _ in runs}, key=lambda k: (order.index(k[0]), k[1]))
for coll, np in panels:
    best_column = len(cpu_peers) > 1
    best_name = " and ".join(names[p] for p in cpu_peers)
    in_place_ratio = bool(inplace and cpu_peers) and coll == "broadcast"
    header = (["size"] + [names[lib] for lib in libs] + [f"Fairway / {names[peer]}" for peer in peers] +
              (["Fairway / best of " + best_name] if best_column else []) +
              (["Fairway in place / best of " + best_name] if in_place_ratio else []) +
              (["bound", "Fairway / bound"] if copy else []))
    lines += [f"### {coll}, {np} ranks", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    data.write(f"# {coll}, {np} ranks\n")
    for size in sorted({s for c, n, s, _ in runs if (c, n) == (coll, np)}):
        med = {lib: statistics.median(runs[(coll, np, size, lib)]) if runs.get((coll, np, size, lib)) else None
               for lib in libs}
        ratio = lambda peer: f"{med['fairway'] / med[peer]:.2f}" if med["fairway"] and med[peer] else "-"
        cell = lambda lib: (f"{med[lib]:.2f}" if med[lib] >= 0.1 else f"{med[lib]:.4f}") if med[lib] is not None else "-"
        row = [human(size)] + [cell(lib) for lib in libs] + [ratio(peer) for peer in peers]
        best = [med[p] for p in cpu_peers if med[p]]
        if best_column:
            row.append(f"{med['fairway'] / max(best):.2f}" if med["fairway"] and best else "-")
        if in_place_ratio:
            row.append(f"{med['fairway-inplace'] / max(best):.2f}" if med["fairway-inplace"] and best else "-")
        if copy:
            limit = bound(coll, np, copy)
            row += [f"{limit:.2f}", f"{med['fairway'] / limit:.2f}" if med["fairway"] and size >= BOUND_FROM else "-"]
        lines.append("| " + " | ".join(row) + " |")
        data.write(f"{size} " + " ".join(f"{med[lib]:.4f}" if med[lib] is not None else "NaN" for lib in libs) + "\n")
    data.write("\n\n")
    lines.append("")
open(f"{outdir}/compare.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
open(f"{outdir}/panels", "w").write("\n".join(f"{c} {n}" for c, n in panels) + "\n")
open(f"{outdir}/libraries", "w").write("\n".join(names[lib] for lib in libs) + "\n")
PY

if command -v gnuplot >/dev/null; then
  mapfile -t panels < "$outdir/panels"
  mapfile -t libraries < "$outdir/libraries"
  {
    echo "set terminal pngcairo size 1200,$((360 * ${#panels[@]})) font ',10'"
    echo "set output '$outdir/compare.png'"
    echo "set multiplot layout ${#panels[@]},1"
    echo "set logscale x 2; set format x '%.0b%B'; set xlabel 'size (bytes)'; set ylabel 'busbw (GB/s)'; set key top left"
    for i in "${!panels[@]}"; do
      echo "set title '${panels[$i]} ranks'"
      curves=()
      for j in "${!libraries[@]}"; do
        curves+=("'$outdir/compare.dat' index $i using 1:$((j + 2)) with linespoints title '${libraries[$j]}'")
      done
      (IFS=,; echo "plot ${curves[*]}")
    done
    echo "unset multiplot"
  } > "$work/plot.gp"
  gnuplot "$work/plot.gp" && echo "plot: $outdir/compare.png"
else
  echo "no gnuplot: install gnuplot-nox (scripts/setup.sh does) for $outdir/compare.png"
fi
rm -f "$outdir/panels" "$outdir/libraries"
echo "table: $outdir/compare.md"
