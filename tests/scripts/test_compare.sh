#!/usr/bin/env bash
# scripts/compare.sh end to end on a tiny sweep (-N 50: few calls a size): all four libraries ran
# (every row has a busbw for Fairway, Open MPI, oneCCL and Gloo and the ratios),
# and the plot was drawn where gnuplot is installed; then -m cuda.
set -uo pipefail
compare=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The peers read sizes as the perf binaries do: 1M is 1 MiB, 1Q is refused.
peer_store=$out/store
mkdir -p "$peer_store"
# Captured first: grep -q on a pipe may close it early and fail the writer.
one_mib=$(FAIRWAY_RANK=0 FAIRWAY_WORLD_SIZE=1 PEER_STORE_DIR=$peer_store "$FAIRWAY_BIN/gloo_perf" -b 1M -e 1M -n 1 -w 0)
grep -qE '^ +1048576 +262144 ' <<<"$one_mib" || { echo "FAIL: gloo_perf -b 1M did not run 1 MiB"; exit 1; }
FAIRWAY_RANK=0 FAIRWAY_WORLD_SIZE=1 PEER_STORE_DIR=$peer_store "$FAIRWAY_BIN/gloo_perf" -b 1Q -e 1M 2> /dev/null
[ $? -eq 2 ] || { echo "FAIL: gloo_perf -b 1Q was not refused with exit status 2"; exit 1; }
echo "ok: peer sizes parsed strictly"

"$compare" -N 50 -r 1 -n 2 -c "allreduce allgather" -b 4K -e 16K -o "$out" || { echo "FAIL: compare.sh failed"; exit 1; }
# Fairway out of place and in place, Open MPI, oneCCL (installed from
# PyPI by the script), Gloo, a ratio to each peer and to the best of Open
# MPI and oneCCL, the memory bound (its fraction only from 4 MiB).
rows=$(grep -cE '^\| [0-9]+ KiB( \| [0-9.]+){10} \| - \|$' "$out/compare.md")
[ "$rows" -eq 6 ] || { echo "FAIL: expected 6 complete rows (2 collectives x 3 sizes), found $rows"; cat "$out/compare.md"; exit 1; }
grep -q '| size | Fairway | Fairway in place | Open MPI | oneCCL | Gloo | .* | Fairway / best of Open MPI and oneCCL | bound | Fairway / bound |' "$out/compare.md" ||
  { echo "FAIL: no oneCCL, in-place or bound column or no best-peer ratio"; cat "$out/compare.md"; exit 1; }
grep -q 'oneCCL 2022.1.2 over Intel MPI' "$out/compare.md" || { echo "FAIL: the table does not say how oneCCL ran"; exit 1; }
if command -v gnuplot >/dev/null; then
  [ -s "$out/compare.png" ] || { echo "FAIL: no plot"; exit 1; }
fi
grep -q 'every library timed 50 calls a size (-N 50)' "$out/compare.md" || { echo "FAIL: the table does not say -N 50"; exit 1; }
"$compare" -N 0 -c allreduce -o "$out/n0" 2> /dev/null
[ $? -eq 2 ] || { echo "FAIL: -N 0 was not refused with exit status 2"; exit 1; }
echo "ok: $rows host rows, -N 50 named, -N 0 refused"

# The bound's fraction from 4 MiB: 2-rank allreduce, whose bound is the
# copy rate itself (each rank reads and writes the buffer once).
"$compare" -N 50 -r 1 -n 2 -c allreduce -b 4M -e 4M -p "" -o "$out/bound" > /dev/null || { echo "FAIL: compare.sh -p '' failed"; exit 1; }
copy=$(sed -n 's/^- single-core memcpy of 64 MiB: \([0-9.]*\) GB.*/\1/p' "$out/bound/compare.md")
grep -qE "^\| 4 MiB \| [0-9.]+ \| [0-9.]+ \| $copy \| [0-9.]+ \|$" "$out/bound/compare.md" ||
  { echo "FAIL: no 4 MiB row with the bound ($copy) and a fraction"; cat "$out/bound/compare.md"; exit 1; }
echo "ok: the bound and Fairway's fraction of it"

# -m mappable: Fairway's buffers from fwHostMemAlloc, against the same bound.
"$compare" -N 50 -r 1 -n 2 -c allgather -b 1M -e 1M -p "" -m mappable -o "$out/mappable" > /dev/null ||
  { echo "FAIL: compare.sh -m mappable failed"; exit 1; }
grep -q "host buffers (Fairway's from fwHostMemAlloc)" "$out/mappable/compare.md" &&
  grep -qE '^\| 1 MiB \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| - \|$' "$out/mappable/compare.md" ||
  { echo "FAIL: -m mappable table"; cat "$out/mappable/compare.md"; exit 1; }
echo "ok: Fairway on fwHostMemAlloc buffers"

# -d bfloat16: Fairway and oneCCL; Open MPI and Gloo have no such type and
# leave the table, which says so.
"$compare" -N 50 -r 1 -n 2 -c allreduce -d bfloat16 -b 4K -e 8K -o "$out/bf16" > /dev/null ||
  { echo "FAIL: compare.sh -d bfloat16 failed"; exit 1; }
grep -q '^bfloat16 sum' "$out/bf16/compare.md" &&
  grep -q '| size | Fairway | Fairway in place | oneCCL | Fairway / oneCCL |' "$out/bf16/compare.md" &&
  grep -q '^- Open MPI: not run: it has no bfloat16 type' "$out/bf16/compare.md" &&
  [ "$(grep -cE '^\| [48] KiB( \| [0-9.]+){5} \| - \|$' "$out/bf16/compare.md")" -eq 2 ] ||
  { echo "FAIL: -d bfloat16 table"; cat "$out/bf16/compare.md"; exit 1; }
echo "ok: bfloat16 against oneCCL"

# -i: every library in place (Gloo is compared out of place only).
"$compare" -N 50 -i -r 1 -n 2 -c "reducescatter allgather alltoall" -b 4K -e 4K -o "$out/inplace" > /dev/null ||
  { echo "FAIL: compare.sh -i failed"; exit 1; }
grep -q 'in-place busbw' "$out/inplace/compare.md" &&
  grep -q '^- Gloo: not run: it is compared out of place only' "$out/inplace/compare.md" &&
  [ "$(grep -cE '^\| 4 KiB( \| [0-9.]+){7} \| - \|$' "$out/inplace/compare.md")" -eq 3 ] ||
  { echo "FAIL: -i table"; cat "$out/inplace/compare.md"; exit 1; }
echo "ok: in place against Open MPI and oneCCL"

# -B: this build against another build's binaries (here the same ones),
# one rank included (algbw): two columns and their ratio, no peers.
"$compare" -N 50 -B "$FAIRWAY_BIN" -r 1 -n "1 2" -c allreduce -b 8 -e 16 -o "$out/before" > /dev/null ||
  { echo "FAIL: compare.sh -B failed"; exit 1; }
rows=$(grep -cE '^\| [0-9]+ B \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$' "$out/before/compare.md")
[ "$rows" -eq 4 ] || { echo "FAIL: -B: expected 4 rows (2 rank counts x 2 sizes)"; cat "$out/before/compare.md"; exit 1; }
grep -q '| size | Fairway | before | Fairway / before |' "$out/before/compare.md" ||
  { echo "FAIL: -B: no before column"; cat "$out/before/compare.md"; exit 1; }
echo "ok: -B compares two builds"

# -m cuda: on a GPU machine Fairway's device rows are complete and NCCL is a
# column (with a number, or a note saying why it did not run at that rank
# count); without a GPU the script refuses, exit 2, naming the reason.
"$compare" -m cuda -r 1 -n 2 -c allreduce -b 4K -e 8K -o "$out/cuda" > "$out/cuda.log" 2>&1
status=$?
if [ "$status" -eq 2 ]; then
  grep -q -- '-m cuda: .' "$out/cuda.log" || { echo "FAIL: -m cuda refused without a reason"; cat "$out/cuda.log"; exit 1; }
  echo "ok: -m cuda refused here: $(grep -m1 -- '-m cuda: ' "$out/cuda.log")"
elif [ "$status" -eq 0 ]; then
  grep -q '| size | Fairway | NCCL | Open MPI | Gloo |' "$out/cuda/compare.md" || { echo "FAIL: no NCCL column"; cat "$out/cuda/compare.md"; exit 1; }
  rows=$(grep -cE '^\| [0-9]+ KiB \| [0-9.]+ \| ([0-9.]+|-) \| [0-9.]+ \| [0-9.]+ \|' "$out/cuda/compare.md")
  [ "$rows" -eq 2 ] || { echo "FAIL: expected 2 device rows, found $rows"; cat "$out/cuda/compare.md"; exit 1; }
  if grep -qE '^\| [0-9]+ KiB \| [0-9.]+ \| - \|' "$out/cuda/compare.md"; then
    grep -q '^- NCCL on 2 ranks: not run: .' "$out/cuda/compare.md" || { echo "FAIL: NCCL missing with no reason"; exit 1; }
  fi
  echo "ok: -m cuda table with NCCL"
else
  echo "FAIL: compare.sh -m cuda exited $status"; cat "$out/cuda.log"; exit 1
fi
