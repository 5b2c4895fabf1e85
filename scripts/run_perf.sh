#!/usr/bin/env bash
# Quick start: set up, build, and run all_reduce_perf on 4 local ranks.
# Extra arguments go to all_reduce_perf (nccl-tests flags). Only what the
# perf binaries need is set up (Debian packages and build/): nothing of
# PyTorch, which scripts/run_tests.sh installs.
set -euo pipefail
cd "$(dirname "$0")/.."
# The library, its UCX plugin (the host path needs no other), the launcher
# and the perf binaries.
FAIRWAY_NO_PYTHON=1 FAIRWAY_BUILD_TARGETS="fairway fairway-transport-ucx fairwayrun fairway-info all_reduce_perf
  reduce_scatter_perf all_gather_perf broadcast_perf reduce_perf alltoall_perf sendrecv_perf gather_perf scatter_perf" \
  bash scripts/setup.sh
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(-b 8 -e 64M -f 2)
exec build/bin/fairwayrun -np 4 build/bin/all_reduce_perf "${args[@]}"
