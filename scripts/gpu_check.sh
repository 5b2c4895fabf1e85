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
#
# A lease shorter than the whole check: run it detached, in the order of
# what matters most, and follow it from call to call while the machine is
# warm; whatever finished is in the report each follow leaves in $OUT.
#   bash scripts/gpu_check.sh --detach build "--quick test" "--ranks 1,2 sweep" ...
#   bash scripts/gpu_check.sh --follow SECONDS
# --detach runs each argument as one gpu_check command line, in order, in a
# session of its own (so it outlives the call that started it), and stops
# once the library fails to build. --follow waits for it at most SECONDS, printing its
# output and copying the report, the logs and its output into $OUT every
# 10 s; it exits 0 once it has ended with every item passed, 1 once it has
# ended otherwise, 3 while it is still running.
set -euo pipefail
cd "$(dirname "$0")/.."
detached=build-gpu/check/detached
case "${1:-}" in
  --detach)
    shift
    [ $# -gt 0 ] || { echo "gpu_check: --detach needs one or more command lines, e.g. build \"--quick test\"" >&2; exit 2; }
    mkdir -p "$detached"
    rm -f "$detached/status"
    setsid nohup bash -c '
      status=0
      for line in "$@"; do
        echo "gpu_check --detach: $line"
        # word splitting of each line is intended: it holds options and steps
        code=0
        env -u OUT bash scripts/gpu_check.sh $line || code=$?
        [ "$code" = 0 ] || status=1
        [ "$code" = 2 ] && break  # the library did not build: nothing after can run
      done
      echo "$status" > '"$detached"'/status' gpu_check "$@" > "$detached/output.log" 2>&1 < /dev/null &
    echo "gpu_check: detached (process $!); bash scripts/gpu_check.sh --follow SECONDS follows it"
    exit 0 ;;
  --follow)
    seconds=${2:?"gpu_check: --follow SECONDS"}
    [ -f "$detached/output.log" ] || { echo "gpu_check: nothing detached to follow (no $detached/output.log)" >&2; exit 2; }
    out=${OUT:-build-gpu/check/out}
    mkdir -p "$out"
    shown=0
    deadline=$((SECONDS + seconds))
    while :; do
      ended=0
      [ -f "$detached/status" ] && ended=1  # before the copies, so the last copy is complete
      lines=$(wc -l < "$detached/output.log")
      [ "$lines" -gt "$shown" ] && sed -n "$((shown + 1)),${lines}p" "$detached/output.log"
      shown=$lines
      if [ "$(realpath -m "$out")" != "$(realpath -m build-gpu/check/out)" ]; then
        cp -f build-gpu/check/out/report.md build-gpu/check/out/report.json "$out"/ 2> /dev/null || true
      fi
      cp -f "$detached/output.log" "$out/detached-output.log"
      tar -czf "$out/logs.tar.gz" -C build-gpu/check logs 2> /dev/null || true
      [ "$ended" = 1 ] && break
      left=$((deadline - SECONDS))
      [ "$left" -le 0 ] && { echo "gpu_check: still running after ${seconds} s"; exit 3; }
      sleep $((left < 10 ? left : 10))
    done
    status=$(cat "$detached/status")
    echo "gpu_check: the detached check has ended (status $status)"
    exit "$status" ;;
esac
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
