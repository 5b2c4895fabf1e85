#!/usr/bin/env bash
# Quick start: set up, build, and run the whole test suite under ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cd build
ctest --output-on-failure "$@"
