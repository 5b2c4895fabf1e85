#!/usr/bin/env bash
# Trials of a random kill at 8 ranks (Recovery.RandomKillsInRandomCollectives
# in tests/multirank/test_recovery.cc): a random rank, rank 0 included, dies
# at a random point inside random collectives, and in every other trial a
# second rank dies as the survivors start to shrink; the survivors shrink
# and run 1000 checked allreduces. The test suite runs 3 trials; this runs
# as many as asked (50 by default).
#   bash scripts/recovery_trials.sh [TRIALS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
trials=${1:-50}
build=${2:-build}
[ -x "$build/bin/fairway_recovery_tests" ] || { echo "recovery_trials: no $build/bin/fairway_recovery_tests (build first)" >&2; exit 2; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$SECONDS
status=0
FAIRWAY_RECOVERY_TRIALS=$trials "$build/bin/fairway_recovery_tests" \
  --gtest_filter=Recovery.RandomKillsInRandomCollectives > "$log" 2>&1 || status=$?
grep -E '^\[ *(RUN|OK|FAILED|PASSED) |trial [0-9]+|rank [0-9]+/' "$log" || true
echo "recovery_trials: $trials trials in $((SECONDS - start)) s, exit $status"
exit "$status"
