#!/usr/bin/env bash
# -m cuda: on a machine with a GPU the sweep runs on device buffers and every
# value checks out; without one the binary refuses at once, exit status 2,
# saying why (never a crash, a hang or host buffers in disguise).
set -uo pipefail
fairwayrun=$1 perf=$2
out=$("$fairwayrun" -np 2 "$perf" -m cuda -b 1K -e 1M -f 32 -n 2 -w 1 2>&1)
rc=$?
echo "$out"
if grep -q -- '-m cuda: ' <<<"$out"; then
  [ $rc -ne 0 ] || { echo "FAIL: refused -m cuda but exited 0"; exit 1; }
  echo "ok: no usable GPU here, refused with its reason"
  exit 0
fi
[ $rc -eq 0 ] && grep -q 'Out of bounds values : 0 OK' <<<"$out" || { echo "FAIL: device run"; exit 1; }
echo "ok: device buffers checked"
