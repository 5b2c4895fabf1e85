#!/usr/bin/env bash
# The emulated cluster end to end: 2 network namespaces x 2 ranks joined by
# rate-limited veth links. all_reduce_perf must find no wrong value, and each
# node's link must have carried at least the data one 4 MiB allreduce sends
# between nodes (4 MB), which fails if ranks of different "nodes" were
# talking over shared memory. Also checks that without root the script
# declines cleanly. Skipped (77) when not run as root.
set -uo pipefail
script=$1 perf=$2
[ "$(id -u)" -eq 0 ] || { echo "not root: the emulated cluster needs network namespaces"; exit 77; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT

"$script" -n 2 -r 2 -b 4gbit -- "$perf" -b 4M -e 4M -n 4 -w 1 >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
grep -q "Out of bounds values : 0 OK" "$out" || { echo "FAIL: wrong values"; exit 1; }
for node in 0 1; do
  sent=$(awk -v n="$node" '$2 == "node" && $3 == n { print $7 }' "$out")
  awk -v s="${sent:-0}" 'BEGIN { exit !(s >= 4) }' ||
    { echo "FAIL: node $node's link carried ${sent:-no} MB, less than one allreduce"; exit 1; }
done

if command -v setpriv >/dev/null; then
  msg=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$script" -- true 2>&1)
  rc=$?
  [ $rc -eq 0 ] && [[ $msg == *"needs root"* ]] || { echo "FAIL: without root: status $rc, '$msg'"; exit 1; }
fi
echo "ok"
