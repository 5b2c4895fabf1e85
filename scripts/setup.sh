#!/usr/bin/env bash
# Installs the Debian packages Fairway needs (only those missing), then
# configures and builds it in build/ (FAIRWAY_BUILD_TARGETS: only those
# targets), then (unless FAIRWAY_NO_PYTHON=1) the PyTorch backend in .venv.
# Run again, it redoes only what changed.
# Each step's time is printed as it ends.
set -euo pipefail
cd "$(dirname "$0")/.."
step_start=$SECONDS
step_done() {  # step_done WHAT: the time since the last step ended
  echo "setup: $1: $((SECONDS - step_start)) s"
  step_start=$SECONDS
}

packages=(
  build-essential cmake pkg-config          # toolchain
  ccache                                    # serves build-gpu/ what build/ compiled (CMakeLists.txt)
  libucx-dev ucx-utils                      # UCX transport
  libhwloc-dev hwloc                        # topology
  libgtest-dev googletest                   # tests
  openmpi-bin libopenmpi-dev libgloo-dev    # peers for side-by-side benchmarks
  gnuplot-nox                               # their plot (scripts/compare.sh)
  iproute2 python3 python3-pip unzip        # scripts; pip fetches the UCX wheel below
  python3-venv python3-dev                  # the PyTorch backend's virtual environment (.venv)
  clang libclang-rt-14-dev gdb              # sanitizer and fuzz builds; stacks of stalled test ranks
  libboost-context-dev                      # fairway-sim: one fiber per simulated rank
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
step_done "Debian packages"

# A CUDA-aware UCX (the libucx-cu13 wheel from PyPI: UCX 1.22 with cuda_copy
# and cuda_ipc), unpacked into .whl/ for FAIRWAY_UCX_CMAKE_DIR and the tests
# that check the UCX version at run time; its static libraries are dropped.
# Without network the tests that need it are skipped, saying so.
wheel_dir=.whl/libucx-cu13
if [ ! -f "$wheel_dir/lib/cmake/ucx/ucx-config.cmake" ]; then
  rm -rf .whl/download "$wheel_dir"
  if python3 -m pip download --quiet --no-deps --only-binary :all: -d .whl/download libucx-cu13==1.22.0 2>/dev/null; then
    unzip -q .whl/download/libucx_cu13-*.whl 'libucx/*' -d .whl/download
    mv .whl/download/libucx "$wheel_dir"
    rm -f "$wheel_dir"/lib/*.a "$wheel_dir"/lib/*.la
    echo "setup: libucx-cu13 1.22.0 unpacked in $wheel_dir"
  else
    echo "setup: could not fetch the libucx-cu13 wheel (no network?); the UCX wheel tests will be skipped"
  fi
  rm -rf .whl/download
fi
step_done "the UCX wheel"

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo > build-configure.log 2>&1 || { cat build-configure.log; exit 1; }
rm -f build-configure.log
# FAIRWAY_BUILD_TARGETS: only these targets (scripts/run_perf.sh's), else all.
targets=()
for t in ${FAIRWAY_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build build -j "$(nproc)" "${targets[@]}"
step_done "build/ (${FAIRWAY_BUILD_TARGETS:-the library, plugins, tests and perf binaries})"

# The PyTorch backend (python/): a virtual environment in the checkout with
# torch from PyPI (about 3 GB with its nvidia-* wheels: PyPI's torch is the
# CUDA build, which imports and runs CPU tensors on machines without a GPU)
# and the fairway package built against it, with build/'s library and plugins
# copied inside it (python/setup.py).
# FAIRWAY_NO_PYTHON=1 skips it (and the Python tests with it).
if [ "${FAIRWAY_NO_PYTHON:-0}" != 1 ]; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  # expecttest: torch's own test suite (scripts/torch_suite.py) imports it.
  if ! .venv/bin/python -c "import torch, pytest, expecttest" 2>/dev/null; then
    echo "setup: installing torch, pytest and expecttest into .venv (about 3 GB from PyPI)"
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet torch numpy pytest expecttest
  fi
  step_done "torch in .venv"
  # The package is rebuilt only when what it is built from changed: its
  # sources, the library and plugins it carries, or torch. The key of what
  # the installed one was built from is kept beside it.
  package_key() {
    {
      .venv/bin/python -c 'import torch; print(torch.__version__, torch.__file__)'
      find python -type f \( -name '*.py' -o -name '*.cpp' -o -name '*.h' -o -name '*.toml' \) \
        ! -path 'python/tests/*' ! -path 'python/build/*' ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum
      sha256sum build/lib/libfairway.so build/lib/libfairway-*.so include/fairway/*.h
    } | sha256sum | cut -c1-64
  }
  key_file=.venv/fairway-package.key
  key=$(package_key)
  if [ -f "$key_file" ] && [ "$(cat "$key_file")" = "$key" ] && .venv/bin/python -c "import torch, fairway._C" 2>/dev/null; then
    echo "setup: the fairway package in .venv is up to date"
  else
    rm -f "$key_file"
    # One compile of the extension takes up to 1.6 GB (torch's headers); ninja
    # would start nproc + 2 of them. As many as the available memory holds at
    # 2 GiB each, at most one per core, unless MAX_JOBS says otherwise (the
    # extension's files are compiled in that many groups: python/setup.py).
    available_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
    jobs=$(( available_kib / (2 * 1024 * 1024) ))
    [ "$jobs" -gt "$(nproc)" ] && jobs=$(nproc)
    [ "$jobs" -lt 1 ] && jobs=1
    MAX_JOBS="${MAX_JOBS:-$jobs}" FAIRWAY_BUILD_DIR="$PWD/build" \
      .venv/bin/python -m pip install --quiet --no-build-isolation ./python
    echo "$key" > "$key_file"
    echo "setup: fairway $(.venv/bin/python -c 'import fairway; print(fairway.__version__)') installed in .venv against torch $(.venv/bin/python -c 'import torch; print(torch.__version__)')"
  fi
  step_done "the fairway package in .venv"
fi
