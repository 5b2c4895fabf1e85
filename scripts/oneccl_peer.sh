#!/usr/bin/env bash
# Intel oneCCL for CPU, a peer of scripts/compare.sh: installs it from PyPI
# into .peers/oneccl (git-ignored) with Intel MPI's runtime and launcher,
# builds perf/compare/ccl_perf.cc against it, and, with `run NP ARGS...`,
# runs ccl_perf on NP ranks of this host.
#
#   scripts/oneccl_peer.sh install          # idempotent; prints the directory
#   scripts/oneccl_peer.sh run NP -C allgather -b 1K -e 64M -f 2 -n 20 -w 5
#
# Versions: pip settles on oneccl-cpu 2022.1.2 here (2022.2.0 needs a
# libfabric package PyPI does not have); its libccl.so.1 links libccl.so.2
# without shipping it, so that one file comes from the full oneccl wheel of
# the same version. How oneCCL runs (CCL_* below): Intel MPI's transport
# (CCL_ATL_TRANSPORT=mpi, its shared-memory fabric inside the host),
# blocking collectives (CCL_ATL_SYNC_COLL=1, unless set: with more ranks
# than cores its default non-blocking path took tens of milliseconds a call), its
# key-value store on loopback (CCL_KVS_IFACE=lo), one worker thread a rank.
set -euo pipefail
cd "$(dirname "$0")/.."
oneccl_version=2022.1.2 impi_version=2021.18.1
dir=$PWD/.peers/oneccl
root=$dir/root
python=${FAIRWAY_PYTHON:-python3}

install() {
  local installed="oneccl-cpu $oneccl_version, impi-rt $impi_version"
  local built
  built="$installed, $(sha256sum perf/compare/ccl_perf.cc perf/compare/peer_sweep.h src/core/command_line_numbers.h | sha256sum | cut -c1-16)"
  if [ -x "$dir/bin/ccl_perf" ] && [ "$(cat "$dir/stamp" 2> /dev/null)" = "$built" ]; then return 0; fi
  # The packages once per version; ccl_perf again whenever its source changes.
  if [ "$(cut -d, -f1-2 "$dir/stamp" 2> /dev/null)" != "$installed" ]; then
    rm -rf "$dir"
    mkdir -p "$dir/wheels" "$root"
    echo "oneccl_peer: downloading oneCCL $oneccl_version and Intel MPI $impi_version from PyPI" >&2
    "$python" -m pip download --quiet --no-deps -d "$dir/wheels" "oneccl-cpu==$oneccl_version" \
      "oneccl-cpu-devel==$oneccl_version" "impi-rt==$impi_version" "oneccl==$oneccl_version" >&2
    local unpacked=$dir/unpacked wheel
    for wheel in "$dir"/wheels/oneccl_cpu-*.whl "$dir"/wheels/oneccl_cpu_devel-*.whl "$dir"/wheels/impi_rt-*.whl; do
      rm -rf "$unpacked"
      # The wheels' payload lies under NAME.data/data: lib, include, bin, ...
      unzip -qo "$wheel" '*.data/data/*' -x '*/bin/IMB-*' -d "$unpacked"
      cp -a "$unpacked"/*.data/data/. "$root"/
    done
    rm -rf "$unpacked"
    unzip -qo "$dir"/wheels/oneccl-"$oneccl_version"-*.whl "*/lib/libccl.so.2*" -d "$unpacked"
    cp -a "$unpacked"/*.data/data/lib/libccl.so.2* "$root/lib/"
    rm -rf "$unpacked" "$dir/wheels"
    echo "$installed" > "$dir/stamp"
  fi
  echo "oneccl_peer: building ccl_perf" >&2
  mkdir -p "$dir/bin"
  g++ -std=c++17 -O2 -I. -Isrc -I"$root/include" perf/compare/ccl_perf.cc -o "$dir/bin/ccl_perf" \
    -L"$root/lib" -lccl -Wl,-rpath,"$root/lib"
  echo "$built" > "$dir/stamp"
}

case ${1:-} in
  install)
    install
    echo "$dir"
    ;;
  run)
    shift
    np=${1:?"oneccl_peer: run NP ARGS..."}
    shift
    install
    store=$(mktemp -d)
    trap 'rm -rf "$store"' EXIT
    # Intel MPI's launcher forks the ranks on this host; its fabric inside a
    # host is shared memory.
    I_MPI_ROOT=$root FI_PROVIDER_PATH=$root/lib LD_LIBRARY_PATH=$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
      "$root/bin/mpiexec.hydra" -launcher fork -n "$np" -genv I_MPI_FABRICS shm -genv CCL_ATL_TRANSPORT mpi \
      -genv CCL_ATL_SYNC_COLL "${CCL_ATL_SYNC_COLL:-1}" -genv CCL_KVS_IFACE lo -genv CCL_WORKER_COUNT 1 -genv CCL_LOG_LEVEL "${CCL_LOG_LEVEL:-error}" -genv PEER_STORE_DIR "$store" \
      "$dir/bin/ccl_perf" "$@"
    ;;
  *)
    sed -n '2,17p' "$0"
    exit 2
    ;;
esac
