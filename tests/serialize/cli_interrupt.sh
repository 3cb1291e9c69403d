#!/bin/sh
# Ctrl-C during `gpuflow run`: the task it stops is counted once, as cancelled.
# usage: cli_interrupt.sh GPUFLOW GRAPH
out=$(mktemp) || exit 2
"$1" run "$2" --no-progress --log-dir "${TMPDIR:-/tmp}/gpuflow-cli-interrupt" >"$out" 2>&1 &
pid=$!
sleep 1
kill -INT "$pid"
wait "$pid"
rc=$?
cat "$out"
summary=$(grep -E '^[0-9]+ tasks: ' "$out")
rm -f "$out"
[ "$rc" -eq 1 ] || { echo "FAIL: exit code $rc, wanted 1"; exit 1; }
[ "$summary" = "${summary#1 tasks: 0 succeeded, 0 failed, 1 cancelled}" ] &&
  { echo "FAIL: summary '$summary'"; exit 1; }
echo "PASS"
