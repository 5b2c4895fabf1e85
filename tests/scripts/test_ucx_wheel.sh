#!/usr/bin/env bash
# The UCX the plugin loads must be the UCX it was built against, and a
# CUDA-aware UCX from the libucx-cu13 wheel (unpacked by scripts/setup.sh
# into .whl/libucx-cu13) is one FAIRWAY_UCX_CMAKE_DIR builds against.
#   mismatch: this build (system UCX) with the wheel's libucp first in
#             LD_LIBRARY_PATH is refused, both versions and paths named.
#   build:    the UCX plugin built against the wheel runs a job with the
#             wheel's UCX (logged at INFO) with UCX's memory-type cache
#             off unless UCX_MEMTYPE_CACHE is set, and the system's libucp
#             put first is refused the other way round.
# Exit 77 (skipped) without the wheel.
set -uo pipefail
mode=$1 fairwayrun=$2 perf=$3 wheel=$4 source=$5
[ -f "$wheel/lib/cmake/ucx/ucx-config.cmake" ] || { echo "SKIP: no libucx-cu13 wheel in $wheel (scripts/setup.sh fetches it)"; exit 77; }
run() { "$fairwayrun" -np 2 "$perf" -b 1K -e 64K -f 8 -n 2 -w 1 2>&1; }

expect_refusal() {  # expect_refusal OUTPUT RC LOADED_VERSION BUILT_VERSION
  echo "$1"
  [ "$2" -ne 0 ] || { echo "FAIL: the job ran on a libucp of another version"; exit 1; }
  grep -q "the libucp loaded at run time is UCX $3.*built against UCX $4" <<<"$1" ||
    { echo "FAIL: the refusal does not name UCX $3 loaded and UCX $4 built against"; exit 1; }
}

wheel_version=$(sed -n 's/^#define UCP_API_MINOR *\([0-9]*\).*/1.\1/p' "$wheel/include/ucp/api/ucp_version.h")
system_version=$(sed -n 's/^#define UCP_API_MINOR *\([0-9]*\).*/1.\1/p' /usr/include/ucp/api/ucp_version.h)
[ "$wheel_version" != "$system_version" ] || { echo "SKIP: the wheel and the system UCX are both $wheel_version"; exit 77; }

case "$mode" in
  mismatch)
    out=$(LD_LIBRARY_PATH="$wheel/lib" run); rc=$?
    expect_refusal "$out" $rc "$wheel_version" "$system_version"
    ;;
  build)
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
    cmake -S "$source" -B "$dir" -DFAIRWAY_UCX_CMAKE_DIR="$wheel/lib/cmake/ucx" -DFAIRWAY_BUILD_TESTS=OFF \
      -DFAIRWAY_BUILD_PERF=OFF -DFAIRWAY_WITH_CUDA=OFF > "$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
    cmake --build "$dir" --target fairway-transport-ucx -j 2 > "$dir/build.log" 2>&1 || { cat "$dir/build.log"; exit 1; }
    out=$(FAIRWAY_PLUGIN_PATH="$dir/lib" FAIRWAY_DEBUG=INFO FAIRWAY_DEBUG_SUBSYS=TRANSPORT run); rc=$?
    echo "$out" | grep -v "^#" | head -5
    [ $rc -eq 0 ] && grep -q 'Out of bounds values : 0 OK' <<<"$out" || { echo "$out"; echo "FAIL: job on the wheel's UCX"; exit 1; }
    grep -q "ucx: UCX $wheel_version\.[0-9]* from $wheel/lib/libucp.so" <<<"$out" ||
      { echo "FAIL: the log does not show the wheel's libucp"; exit 1; }
    # A CUDA-aware UCX takes device buffers its hooks missed for host memory
    # unless its memory-type cache is off: the plugin turns it off...
    grep -q "ucx: memory-type cache off (MEMTYPE_CACHE=n" <<<"$out" ||
      { echo "FAIL: the log does not show UCX's memory-type cache turned off"; exit 1; }
    # ...unless UCX_MEMTYPE_CACHE says otherwise.
    out=$(FAIRWAY_PLUGIN_PATH="$dir/lib" UCX_MEMTYPE_CACHE=y FAIRWAY_DEBUG=INFO FAIRWAY_DEBUG_SUBSYS=TRANSPORT run)
    grep -q "memory-type cache as UCX_MEMTYPE_CACHE=y says" <<<"$out" ||
      { echo "$out"; echo "FAIL: UCX_MEMTYPE_CACHE=y was not left to decide"; exit 1; }
    out=$(FAIRWAY_PLUGIN_PATH="$dir/lib" LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu run); rc=$?
    expect_refusal "$out" $rc "$system_version" "$wheel_version"
    ;;
  *) echo "usage: $0 mismatch|build FAIRWAYRUN PERF WHEEL_DIR SOURCE_DIR" >&2; exit 2 ;;
esac
echo "ok: $mode"
