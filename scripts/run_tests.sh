#!/usr/bin/env bash
# Quick start: set up, build, and run the whole test suite: ctest on the
# release build, pytest on the PyTorch backend (python/tests) and a subset
# of torch's own distributed test suite (scripts/torch_suite.py), the GPU
# check's bundle and its emulated form (scripts/gpu_bundle.sh,
# scripts/gpu_check.sh --emulated --quick: the command a lent GPU machine
# runs, proven here without one), then the AddressSanitizer +
# UndefinedBehaviorSanitizer run of the unit, error, API and collective
# tests, then each fuzz target for a bounded time (scripts/sanitize.sh).
# Any failure or sanitizer report fails the run. FAIRWAY_QUICK=1 runs only
# ctest, pytest and the suite subset. Each part's time is printed at the
# end, passed or not.
set -euo pipefail
cd "$(dirname "$0")/.."

parts=()  # "seconds name", in the order they ran
part() {  # part NAME COMMAND...: runs it and records its time
  local name=$1 start=$SECONDS
  shift
  "$@" || { local code=$?; parts+=("$((SECONDS - start)) $name (failed)"); return $code; }
  parts+=("$((SECONDS - start)) $name")
}
report_times() {
  echo "run_tests: time per part (s)"
  printf '  %s\n' "${parts[@]}"
  echo "  $SECONDS in all"
}
trap report_times EXIT

part setup bash scripts/setup.sh
# A test per core at a time: the sleeping fault tests overlap the sweeps;
# those that must not share the cores are RUN_SERIAL (tests/CMakeLists.txt).
part ctest bash -c 'cd build && ctest -j "$(nproc)" --output-on-failure "$@"' ctest "$@"
if [ "${FAIRWAY_NO_PYTHON:-0}" != 1 ]; then
  part pytest .venv/bin/python -m pytest -q -p no:cacheprovider python/tests
  # torch's own DistributedTest suite, a subset (the whole run:
  # .venv/bin/python scripts/torch_suite.py).
  part torch-suite .venv/bin/python scripts/torch_suite.py --subset ci --ranks 2,3
fi
if [ "${FAIRWAY_QUICK:-0}" != 1 ]; then
  if [ "${FAIRWAY_NO_PYTHON:-0}" != 1 ]; then
    part gpu-bundle bash scripts/gpu_bundle.sh
    part gpu-check-emulated bash scripts/gpu_check.sh --emulated --quick
  else
    echo "run_tests: FAIRWAY_NO_PYTHON=1: the emulated GPU check (which needs torch) is skipped"
  fi
  part asan bash scripts/sanitize.sh asan
  part fuzz bash scripts/sanitize.sh fuzz "${FAIRWAY_FUZZ_SECONDS:-15}"
fi
