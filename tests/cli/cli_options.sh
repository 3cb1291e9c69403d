#!/bin/sh
# The command's one parser: help and version exit 0, every usage error exits 2 with its message and
# the usage text of its subcommand, each subcommand takes its own options only.
# usage: cli_options.sh GPUFLOW GRAPH
gf=$1 graph=$2 failed=0
out=$(mktemp) || exit 2
# expect CODE PATTERN ARGS...: the exit code, and a line of the output matching PATTERN.
expect() {
  code=$1 pattern=$2
  shift 2
  "$gf" "$@" >"$out" 2>&1
  rc=$?
  if [ "$rc" -ne "$code" ] || ! grep -q -- "$pattern" "$out"; then
    echo "FAIL: gpuflow $*: exit $rc (wanted $code), output:"
    cat "$out"
    failed=1
  fi
}
expect 0 '^usage:' --help
expect 0 '^  gpuflow run ' run --help
expect 0 '^  gpuflow serve ' serve --help
expect 0 '^  gpuflow lease ' lease -h
expect 0 '^gpuflow [0-9]' --version
expect 2 "no command given" 
expect 2 "unknown command 'frobnicate'" frobnicate
expect 2 "cpu-workers.*whole number from -1 to 1000000, not 'abc'" info --cpu-workers abc
expect 2 "devices.*whole number from 0 to 1000000, not '1.5'" validate "$graph" --devices 0,1.5
expect 2 "progress-interval.*seconds above 0, not '0'" run "$graph" --progress-interval 0
expect 2 "unknown size unit in '3X'" lease --gpu-memory 3X -- true
expect 2 "gpus.*a number >= 0, not '-1'" lease --gpus -1 -- true
expect 2 "COMMAND is required" lease --gpus 1
expect 2 "excludes" run "$graph" --in-service --in-process
expect 2 "excludes" run "$graph" --dask tcp://nowhere:1 --trace t.json
expect 2 "Exactly 1 option from \[--json,--binary\]" convert "$graph" out.json
expect 2 "requires --token-file" serve --listen 127.0.0.1:0
expect 2 "not expected" status --gpus 1
expect 2 "^usage:" info --frobnicate
rm -f "$out"
[ "$failed" -eq 0 ] && echo "PASS"
