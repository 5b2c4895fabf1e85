#!/usr/bin/env bash
# Quick start: set up, build, and run the whole test suite: ctest on the
# release build, pytest on the PyTorch backend (python/tests), then the
# AddressSanitizer + UndefinedBehaviorSanitizer run
# of the unit, error, API and collective tests, then each fuzz target for a
# bounded time (scripts/sanitize.sh). Any failure or sanitizer report fails
# the run. FAIRWAY_QUICK=1 runs only the first part.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
(cd build && ctest --output-on-failure "$@")
if [ "${FAIRWAY_NO_PYTHON:-0}" != 1 ]; then
  .venv/bin/python -m pytest -q -p no:cacheprovider python/tests
fi
if [ "${FAIRWAY_QUICK:-0}" != 1 ]; then
  bash scripts/sanitize.sh asan
  bash scripts/sanitize.sh fuzz "${FAIRWAY_FUZZ_SECONDS:-15}"
fi
