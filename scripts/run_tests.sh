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
# ctest, pytest and the suite subset.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
(cd build && ctest --output-on-failure "$@")
if [ "${FAIRWAY_NO_PYTHON:-0}" != 1 ]; then
  .venv/bin/python -m pytest -q -p no:cacheprovider python/tests
  # torch's own DistributedTest suite, a subset (the whole run:
  # .venv/bin/python scripts/torch_suite.py).
  .venv/bin/python scripts/torch_suite.py --subset ci --ranks 2,3
fi
if [ "${FAIRWAY_QUICK:-0}" != 1 ]; then
  if [ "${FAIRWAY_NO_PYTHON:-0}" != 1 ]; then
    bash scripts/gpu_bundle.sh
    bash scripts/gpu_check.sh --emulated --quick
  else
    echo "run_tests: FAIRWAY_NO_PYTHON=1: the emulated GPU check (which needs torch) is skipped"
  fi
  bash scripts/sanitize.sh asan
  bash scripts/sanitize.sh fuzz "${FAIRWAY_FUZZ_SECONDS:-15}"
fi
