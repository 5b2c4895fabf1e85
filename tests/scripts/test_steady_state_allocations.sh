#!/usr/bin/env bash
# all_reduce_perf must allocate nothing per call once warmed up: 20 and 400
# timed iterations must make the same number of malloc calls on every rank
# (a few allowed for output buffering).
set -euo pipefail
fairwayrun=$1 perf=$2 counter=$3
count() {
  "$fairwayrun" -np 2 -x LD_PRELOAD="$counter" "$perf" -b 1M -e 1M -n "$1" -w 2 -c 0 2>&1 >/dev/null |
    awk '/^mallocs/ {s += $2} END {print s}'
}
few=$(count 20)
many=$(count 400)
echo "mallocs over both ranks: $few with 20 iterations, $many with 400"
[ -n "$few" ] && [ -n "$many" ] && [ $((many - few)) -le 8 ]
