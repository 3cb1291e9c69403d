#!/bin/sh
# examples/json/gpu_pipeline.json keeps its lock directory out of the current directory.
# usage: cli_no_litter.sh GPUFLOW GRAPH
dir=$(mktemp -d) || exit 2
cd "$dir" || exit 2
"$1" run "$2" --no-progress --log-dir "$dir/logs"
rc=$?
left=$(ls -A | grep -v '^logs$')
ls -A "$dir/logs" | grep -q gpu-locks && left="$left logs/gpu-locks*"
cd / && rm -rf "$dir"
[ "$rc" -eq 0 ] || { echo "FAIL: exit code $rc"; exit 1; }
[ -z "$left" ] || { echo "FAIL: left behind: $left"; exit 1; }
echo "PASS"
