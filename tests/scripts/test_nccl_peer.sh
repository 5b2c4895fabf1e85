#!/usr/bin/env bash
# nccl_perf, the NCCL peer of scripts/compare.sh -m cuda: with a GPU a short
# sweep prints a row per size; without one it refuses, exit 2, saying why.
# Either way, a missing PEER_STORE_DIR is a usage error (exit 2).
set -uo pipefail
fairwayrun=$1 nccl_perf=$2
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
"$fairwayrun" -np 1 "$nccl_perf" -b 4096 -e 65536 > /dev/null 2> "$store/usage"
[ $? -ne 0 ] && grep -q PEER_STORE_DIR "$store/usage" || { echo "FAIL: no usage error without PEER_STORE_DIR"; exit 1; }
out=$("$fairwayrun" -np 1 -x PEER_STORE_DIR="$store" "$nccl_perf" -C allreduce -b 4096 -e 65536 -n 5 -w 1 2>&1)
rc=$?
echo "$out"
if [ $rc -eq 2 ] && grep -q '^nccl_perf: no usable CUDA device: .' <<<"$out"; then
  echo "ok: no usable GPU here, refused with its reason"
  exit 0
fi
rows=$(echo "$out" | grep -cE '^ +[0-9]+ +[0-9]+ +float +sum ')
[ $rc -eq 0 ] && [ "$rows" -eq 5 ] || { echo "FAIL: exit $rc, $rows rows (expected 5)"; exit 1; }
echo "ok: $rows rows on the GPU"
