#!/usr/bin/env bash
# -J writes the table's rows and summary as JSON that parses and agrees with
# the printed table: one row per size, zero wrong values, a positive busbw.
set -uo pipefail
fairwayrun=$1 perf=$2
json=$(mktemp)
trap 'rm -f "$json"' EXIT
"$fairwayrun" -np 2 "$perf" -b 1K -e 64K -f 4 -n 2 -w 1 -J "$json" || { echo "FAIL: the run failed"; exit 1; }
python3 - "$json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
rows = doc["rows"]
sizes = [r["size"] for r in rows]
assert sizes == [1024, 4096, 16384, 65536], sizes
assert doc["ranks"] == 2 and doc["wrong"] == 0, doc
for r in rows:
    for key in ("out_of_place", "in_place"):
        m = r[key]
        assert m["wrong"] == 0 and m["time_us"] > 0 and m["busbw_gbps"] > 0, r
        assert abs(m["busbw_gbps"] - m["algbw_gbps"] * doc["busbw_factor"]) < 1e-9, r
assert doc["avg_busbw_gbps"] > 0
print("ok:", len(rows), "rows,", doc["benchmark"])
PY
