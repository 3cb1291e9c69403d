#!/bin/sh
# run_trace_test.sh GPUFLOW DOCUMENT: `gpuflow run --trace` on a two-task document succeeds and
# writes a Chrome trace (JSON a trace viewer loads) with one complete slice per task, each named
# after its task, the second starting after the first ended (it depends on it).
set -eu
gpuflow=$1 document=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$gpuflow" run "$document" --log-dir "$work/logs" --trace "$work/trace.json" --no-progress
python3 - "$work/trace.json" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    trace = json.load(f)
events = trace["traceEvents"] if isinstance(trace, dict) else trace
slices = {e["name"]: e for e in events if e.get("ph") == "X" and e.get("name") in ("hello", "world")}
assert set(slices) == {"hello", "world"}, f"task slices: {sorted(slices)} in {len(events)} events"
for name, e in slices.items():
    assert e["dur"] >= 0 and isinstance(e["ts"], (int, float)), f"{name}: {e}"
hello, world = slices["hello"], slices["world"]
assert world["ts"] >= hello["ts"] + hello["dur"], f"world began before hello ended: {hello} {world}"
print("PASS")
PY
