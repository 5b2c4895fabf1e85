#!/usr/bin/env bash
# The GPU check: one command that builds Fairway from the checkout and
# scripts/gpu_bundle.sh's bundle (no network), runs every device path's
# tests, -m cuda sweeps with every element checked, timings against their
# references, and the PyTorch backend on CUDA tensors, and writes one
# report (report.md, report.json, logs.tar.gz) into $OUT.
#   bash scripts/gpu_check.sh [--emulated] [--quick] [build|test|sweep|timing|torch|all ...]
# On a GPU machine run it whole, or step by step in separate calls while
# the machine is warm (build-gpu/ keeps the build and the results between
# them). --emulated runs the same command on a machine without a GPU,
# under the host-emulated device runtime, skipping what needs CUDA and
# saying so; CI runs it with --quick. The Python used is the one with
# torch: $FAIRWAY_PYTHON, else /opt/torch/.venv, else this checkout's .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${FAIRWAY_PYTHON:-}
if [ -z "$python" ]; then
  for candidate in /opt/torch/.venv/bin/python3 .venv/bin/python python3; do
    if command -v "$candidate" > /dev/null && "$candidate" -c 'import torch' 2> /dev/null; then
      python=$candidate
      break
    fi
  done
fi
[ -n "$python" ] || { echo "gpu_check: no Python with torch (set FAIRWAY_PYTHON)" >&2; exit 2; }
export PYTHONUNBUFFERED=1
PYTHONPATH="$PWD/scripts${PYTHONPATH:+:$PYTHONPATH}" exec "$python" -m gpucheck "$@"
