#!/usr/bin/env bash
# Installs the Debian packages Fairway needs (only those missing), then
# configures and builds it in build/. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake pkg-config          # toolchain
  libucx-dev ucx-utils                      # UCX transport
  libhwloc-dev hwloc                        # topology
  libgtest-dev googletest                   # tests
  openmpi-bin libopenmpi-dev libgloo-dev    # peers for side-by-side benchmarks
  gnuplot-nox                               # their plot (scripts/compare.sh)
  iproute2 python3                          # scripts
  clang libclang-rt-14-dev gdb              # sanitizer and fuzz builds; stacks of stalled test ranks
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo > build-configure.log 2>&1 || { cat build-configure.log; exit 1; }
rm -f build-configure.log
cmake --build build -j "$(nproc)"
