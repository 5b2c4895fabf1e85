#!/usr/bin/env bash
# fairwayrun's counts: an empty, negative, fractional or junk-trailed value
# is a usage error (exit 2) before any rank starts; valid ones run.
set -uo pipefail
fairwayrun=$1
refused() {
  "$fairwayrun" "$@" true 2>/dev/null
  local rc=$?
  [ $rc -eq 2 ] || { echo "FAIL: fairwayrun $* exited $rc, expected 2"; exit 1; }
}
refused -np ""
refused -np -1
refused -np 2x
refused -np 2 --grace ""
refused -np 2 --timeout 1.5
refused -np 2 --nodes 0
"$fairwayrun" -np 2 --grace 0 --timeout 5 true || { echo "FAIL: valid counts refused"; exit 1; }
echo "ok: bad counts refused, good ones run"
