#!/usr/bin/env bash
# Quick start: set up, build, and run all_reduce_perf on 4 local ranks.
# Extra arguments go to all_reduce_perf (nccl-tests flags).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(-b 8 -e 64M -f 2)
exec build/bin/fairwayrun -np 4 build/bin/all_reduce_perf "${args[@]}"
