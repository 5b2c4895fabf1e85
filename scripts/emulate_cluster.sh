#!/usr/bin/env bash
# Emulates a cluster on this machine and runs a Fairway binary on it.
#
#   sudo scripts/emulate_cluster.sh [-n NODES] [-r RANKS_PER_NODE] [-b RATE] [-m MTU] [-x VAR=VALUE]... -- CMD [ARGS...]
#
# Each node is a network namespace with one veth link to a bridge (in a
# namespace of its own, so the host's network is untouched); a tbf qdisc
# limits each link to RATE in both directions (default 2gbit). Links carry
# jumbo frames (MTU 9000, as cluster fabrics are set up) unless -m says
# otherwise: tbf counts every frame's Ethernet, IP and TCP headers against
# RATE, 0.7% of it at MTU 9000 and 4.4% at 1500. Ranks of one
# node run in its namespace, share memory (UCX shared memory/CMA inside the
# node) and reach other nodes only across their node's rate-limited link
# (Fairway's inter-node UCX uses network transports only, pinned to the
# node's link). Rank r runs on node r / RANKS_PER_NODE, bound to CPU
# r mod CPUs. At the end the script prints each link's byte counters, so
# you can see the traffic really crossed them, and tears everything down,
# also when interrupted. The exit status is the first failing rank's.
# Without root it says so and exits with status 0, doing nothing.
set -uo pipefail

nodes=2 per_node=4 rate=2gbit mtu=9000
exports=()
while [ $# -gt 0 ]; do
  case $1 in
    -n) nodes=$2; shift 2 ;;
    -r) per_node=$2; shift 2 ;;
    -b) rate=$2; shift 2 ;;
    -m) mtu=$2; shift 2 ;;
    -x) exports+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "usage: $0 [-n NODES] [-r RANKS_PER_NODE] [-b RATE] [-m MTU] [-x VAR=VALUE]... -- CMD [ARGS...]" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "$0: no command to run (put it after --)" >&2; exit 2; }
[[ $mtu =~ ^[0-9]+$ ]] && ((mtu >= 576 && mtu <= 65535)) ||
  { echo "$0: -m $mtu: the MTU must be a number of bytes from 576 to 65535" >&2; exit 2; }
if [ "$(id -u)" -ne 0 ]; then
  echo "$0: emulating nodes needs root (it creates network namespaces, veth links and tc qdiscs); skipped"
  exit 0
fi
for tool in ip tc taskset; do
  command -v $tool >/dev/null || { echo "$0: $tool is missing (iproute2, util-linux)" >&2; exit 2; }
done

tag=fw$$                      # names unique to this run
switch=$tag-sw
subnet=10.$((($$ >> 8) % 200 + 20)).$(($$ % 250)).0
ip_of() { echo "${subnet%.0}.$(($1 + 1))"; }
pids=()

teardown() {
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
  for ((m = 0; m < nodes; m++)); do ip netns del "$tag-n$m" 2>/dev/null; done
  ip netns del "$switch" 2>/dev/null
}
trap teardown EXIT
trap 'echo "$0: interrupted, tearing down" >&2; exit 130' INT TERM

ip netns add "$switch" || exit 1
ip -n "$switch" link add br0 type bridge
ip -n "$switch" link set br0 up
for ((m = 0; m < nodes; m++)); do
  ns=$tag-n$m
  ip netns add "$ns" || exit 1
  ip link add "$tag-v$m" netns "$switch" type veth peer name eth0 netns "$ns"
  # The MTU both ends of the link agree on (a kernel may refuse one it checked as valid).
  ip -n "$switch" link set "$tag-v$m" mtu "$mtu" master br0 up || exit 1
  ip -n "$ns" addr add "$(ip_of $m)/24" dev eth0
  ip -n "$ns" link set eth0 mtu "$mtu" up || exit 1
  ip -n "$ns" link set lo up
  # The node's link, both directions: leaving the node and leaving the switch towards it.
  tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst 512kb latency 100ms
  tc -n "$switch" qdisc add dev "$tag-v$m" root tbf rate "$rate" burst 512kb latency 100ms
done

world=$((nodes * per_node))
port=$((20000 + $$ % 20000))
secret=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
cpus=$(nproc)
echo "# emulated cluster: $nodes nodes x $per_node ranks, links $rate each way, MTU $mtu, subnet $subnet/24"
for ((r = 0; r < world; r++)); do
  m=$((r / per_node))
  ip netns exec "$tag-n$m" env FAIRWAY_RANK=$r FAIRWAY_WORLD_SIZE=$world \
    FAIRWAY_LOCAL_RANK=$((r % per_node)) FAIRWAY_LOCAL_SIZE=$per_node \
    FAIRWAY_COMM_ID="$(ip_of 0):$port" FAIRWAY_JOB_SECRET="$secret" FAIRWAY_NODE_ID="node$m" \
    FAIRWAY_NET_DEVICES=eth0 "${exports[@]}" \
    taskset -c $((r % cpus)) "$@" &
  pids+=($!)
done

status=0
for pid in "${pids[@]}"; do
  wait "$pid"
  rc=$?
  [ $status -eq 0 ] && [ $rc -ne 0 ] && status=$rc
done
pids=()
for ((m = 0; m < nodes; m++)); do
  ip -n "$tag-n$m" -s link show eth0 | awk -v node=$m '
    /RX:/ { getline; rx = $1 } /TX:/ { getline; tx = $1 }
    END { printf "# node %d link: sent %.1f MB, received %.1f MB\n", node, tx / 1e6, rx / 1e6 }'
done
exit $status
