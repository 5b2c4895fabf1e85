#!/usr/bin/env bash
# fairway-info and the topology and transport overrides, end to end: each
# case runs the real binary and checks its output, exit status and log line.
set -uo pipefail
fairwayrun=$1 info=$2 data=$3
failures=0
out=$(mktemp)
# A plugin directory with UCX alone: no CUDA runtime, no NCCL, on any machine.
ucx_only=$(mktemp -d)
ln -s "$(cd "$(dirname "$info")/../lib" && pwd)/libfairway-transport-ucx.so" "$ucx_only/"
trap 'rm -rf "$out" "$out.xml" "$ucx_only"' EXIT

# expect STATUS PATTERN DESCRIPTION -- COMMAND...: COMMAND exits with STATUS
# (0 or "fail") and its output matches the extended regex PATTERN.
expect() {
  local status=$1 pattern=$2 what=$3
  shift 4
  "$@" >"$out" 2>&1
  local rc=$?
  if { [ "$status" = 0 ] && [ $rc -ne 0 ]; } || { [ "$status" = fail ] && [ $rc -eq 0 ]; }; then
    echo "FAIL: $what: exit status $rc"; cat "$out"; failures=$((failures + 1)); return
  fi
  if ! grep -Eq -- "$pattern" "$out"; then
    echo "FAIL: $what: output lacks /$pattern/"; cat "$out"; failures=$((failures + 1)); return
  fi
  echo "ok: $what"
}

expect 0 'GPUs: none|GPU 0' "fairway-info alone describes this machine" -- "$info"
expect 0 'FAIRWAY_SLICE_BYTES +2M +set' \
  "fairway-info --config prints each variable's value in effect" -- env FAIRWAY_SLICE_BYTES=2048K "$info" --config
expect 0 'FAIRWAY_JOB_SECRET +\(set\) +set' "fairway-info --config never prints the job secret" -- \
  sh -c "FAIRWAY_JOB_SECRET=hunter2 '$info' --config | grep -v hunter2"
expect fail 'FAIRWAY_SPIN_US=soon is not an integer' "fairway-info --config names an invalid variable" -- \
  env FAIRWAY_SPIN_US=soon "$info" --config
# Without a GPU device buffers have no plan; with one they have NCCL or staging.
expect 0 'plan: (device buffers: none|.*device buffers: intra-node (nccl|ucx-staged))' \
  "the plan's choice is logged at INFO" -- env FAIRWAY_DEBUG=INFO "$info"

# A described machine: each GPU's NIC, the groups of 8 ranks as 2 interleaved nodes.
export FAIRWAY_TOPO_FILE=$data/gpu8_nic4.xml
expect 0 'GPU 7  0000:c3:00.0 cuda7    NUMA 1  nearest NIC mlx5_0' "GPU-NIC pairs from an hwloc XML file" -- "$info"
expect 0 'rail 3  \[6,7\]' "rails of 2 interleaved nodes x 4" -- "$fairwayrun" -np 8 --node-ids a,b,a,b,a,b,a,b "$info"
expect 0 'network device mlx5_3:1 \(nearest NIC to GPU 0000:21:00.0\) is not usable.*UCX chooses instead' \
  "a NIC from the topology that UCX cannot open falls back, with a warning" -- "$fairwayrun" -np 4 --nodes 2 "$info"
expect 0 'node 3 node3 +ranks \[6,7\]' "8 ranks as 4 nodes x 2" -- "$fairwayrun" -np 8 --nodes 4 "$info"
unset FAIRWAY_TOPO_FILE

expect 0 'HostName' "FAIRWAY_TOPO_DUMP_FILE writes hwloc XML" -- sh -c "FAIRWAY_TOPO_DUMP_FILE=$out.xml '$info' >/dev/null && cat $out.xml"
expect fail 'FAIRWAY_TOPO_FILE=/nonexistent.xml: cannot open as hwloc XML' "an unreadable topology file is named" -- \
  env FAIRWAY_TOPO_FILE=/nonexistent.xml "$info"
expect fail 'FAIRWAY_INTRA_TRANSPORT=nccl cannot be honoured for the intra-node level: libfairway-device-cuda.so could not be loaded' \
  "a forced NCCL that cannot run fails at creation" -- env FAIRWAY_PLUGIN_PATH="$ucx_only" FAIRWAY_INTRA_TRANSPORT=nccl "$info"
expect fail 'FAIRWAY_TRANSPORT=nccl cannot be honoured' "FAIRWAY_TRANSPORT=nccl likewise" -- \
  env FAIRWAY_PLUGIN_PATH="$ucx_only" FAIRWAY_TRANSPORT=nccl "$info"
expect 0 'device runtime unavailable: libfairway-device-cuda.so could not be loaded' \
  "a missing plugin is reported with its reason" -- env FAIRWAY_PLUGIN_PATH="$ucx_only" "$info"
expect fail 'FAIRWAY_INTER_TRANSPORT=carrier-pigeon is not one of auto\|ucx\|nccl' "a bad transport name is named" -- \
  env FAIRWAY_INTER_TRANSPORT=carrier-pigeon "$info"
expect 0 'plan: host buffers: ucx at both levels \(FAIRWAY_TRANSPORT=ucx\)' "forcing ucx everywhere works" -- \
  env FAIRWAY_DEBUG=INFO FAIRWAY_TRANSPORT=ucx "$fairwayrun" -np 2 --nodes 2 "$info"
expect fail 'inter-node level' "a forced network device that does not exist fails at creation" -- \
  "$fairwayrun" -np 2 --nodes 2 -x FAIRWAY_NET_DEVICES=nosuchnic0 "$info"
expect 0 'inter-node network device lo \(FAIRWAY_NET_DEVICES' "FAIRWAY_NET_DEVICES picks the device" -- \
  "$fairwayrun" -np 2 --nodes 2 -x FAIRWAY_NET_DEVICES=lo -x FAIRWAY_DEBUG=INFO "$info"
expect 0 'links for the cost model: intra-node [0-9.]+ us, [0-9.]+ GB/s \(measured\); inter-node [0-9.]+ us, [0-9.]+ GB/s \(measured\)' \
  "FAIRWAY_MEASURE_LINKS measures both links at creation" -- \
  env FAIRWAY_MEASURE_LINKS=1 FAIRWAY_DEBUG=INFO "$fairwayrun" -np 4 --nodes 2 "$info"
expect 0 'inter-node 20.00 us, 2.00 GB/s \(FAIRWAY_INTER_LINK\)' "a link given by its variable is not replaced" -- \
  env FAIRWAY_MEASURE_LINKS=1 FAIRWAY_INTER_LINK=20,2 FAIRWAY_DEBUG=INFO "$fairwayrun" -np 4 --nodes 2 "$info"
expect fail 'FAIRWAY_MEASURE_LINKS=yes is not an integer in \[0, 1\]' "a bad FAIRWAY_MEASURE_LINKS is named" -- \
  env FAIRWAY_MEASURE_LINKS=yes "$info"

echo "$failures failures"
[ "$failures" -eq 0 ]
