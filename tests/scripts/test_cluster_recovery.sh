#!/usr/bin/env bash
# Recovery across emulated nodes: 2 network namespaces x 4 ranks on
# rate-limited links. Rank 1 (node 0) dies at call 20 and rank 6 (node 1)
# at call 60 of the checked allreduces; each of the 6 survivors must report
# both recoveries, 0 wrong, and end "ok". Skipped (77) when not run as root.
set -uo pipefail
script=$1 tool=$2
[ "$(id -u)" -eq 0 ] || { echo "not root: the emulated cluster needs network namespaces"; exit 77; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# A killed victim's 137 is the expected end of its process; any other status fails the run.
"$script" -n 2 -r 4 -b 1gbit -x FAIRWAY_TEST_VICTIMS="1 6" -x FAIRWAY_TIMEOUT_MS="${FAIRWAY_TIMEOUT_MS:-5000}" -- \
  bash -c '"$0" "$@"; rc=$?
           case " $FAIRWAY_TEST_VICTIMS " in *" $FAIRWAY_RANK "*) [ $rc -eq 137 ] && exit 0 ;; esac
           [ $rc -eq 0 ] || echo "rank $FAIRWAY_RANK exited with status $rc"; exit $rc' \
  "$tool" --kill 1@20 --kill 6@60 --calls 1000 >"$out" 2>&1
rc=$?
grep -v "UCX  WARN" "$out"
[ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
for rank in 0 2 3 4 5 7; do
  grep -q "^rank $rank: ok: 2 recoveries, 1060 checked allreduces, 0 wrong" "$out" ||
    { echo "FAIL: rank $rank did not recover twice and finish"; exit 1; }
done
echo "ok"
