#!/bin/sh
# Ctrl-C during `gpuflow run`: the task it stops is counted once, as cancelled.
# usage: cli_interrupt.sh GPUFLOW GRAPH
out=$(mktemp) || exit 2
logs=$(mktemp -d) || exit 2
"$1" run "$2" --no-progress --log-dir "$logs" >"$out" 2>&1 &
pid=$!
# Interrupt once the task runs (its log files exist), however slow the machine or the build.
tries=0
until [ -n "$(find "$logs" -name 'nap.out' 2>/dev/null)" ]; do
  tries=$((tries + 1))
  [ "$tries" -gt 300 ] && { kill -9 "$pid"; echo "FAIL: the task never started"; exit 1; }
  sleep 0.1
done
sleep 0.2
kill -INT "$pid"
wait "$pid"
rc=$?
cat "$out"
summary=$(grep -E '^[0-9]+ tasks: ' "$out")
rm -rf "$out" "$logs"
[ "$rc" -eq 1 ] || { echo "FAIL: exit code $rc, wanted 1"; exit 1; }
[ "$summary" = "${summary#1 tasks: 0 succeeded, 0 failed, 1 cancelled}" ] &&
  { echo "FAIL: summary '$summary'"; exit 1; }
echo "PASS"
