#!/usr/bin/env bash
# scripts/compare.sh end to end on a tiny sweep: all three libraries ran
# (every row has a busbw for Fairway, Open MPI and Gloo and both ratios),
# and the plot was drawn where gnuplot is installed.
set -uo pipefail
compare=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$compare" -r 1 -n 2 -c "allreduce allgather" -b 4K -e 16K -o "$out" || { echo "FAIL: compare.sh failed"; exit 1; }
rows=$(grep -cE '^\| [0-9]+ KiB \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$' "$out/compare.md")
[ "$rows" -eq 6 ] || { echo "FAIL: expected 6 complete rows (2 collectives x 3 sizes), found $rows"; cat "$out/compare.md"; exit 1; }
if command -v gnuplot >/dev/null; then
  [ -s "$out/compare.png" ] || { echo "FAIL: no plot"; exit 1; }
fi
echo "ok: $rows rows"
