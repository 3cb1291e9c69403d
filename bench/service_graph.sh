#!/bin/bash
# A graph of N no-op kernels run inside the service against the same graph in this process
# (issue 13, item 2; docs/benchmarks.md, "Graphs in the service"): `gpuflow serve --plugin
# noop_kernels.so` on the host backend, then service_graph_bench, which times gf_graph_submit to
# the end of gf_run_wait both ways, interleaved. Target: 1,000,000 tasks in the service < 2 s.
#
#   bench/service_graph.sh [BUILD_DIR] [TASKS] [REPEATS]     defaults: build 1000000 5
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
TASKS=${2:-1000000}
REPEATS=${3:-5}
GPUFLOW=$BUILD/tools/gpuflow/gpuflow
BENCH=$BUILD/bench/service_graph_bench
PLUGIN=$BUILD/bench/noop_kernels.so
for f in "$GPUFLOW" "$BENCH" "$PLUGIN"; do
  [ -e "$f" ] || { echo "service_graph.sh: $f not found: build it first" >&2; exit 2; }
done
DIR=$(mktemp -d)
"$GPUFLOW" serve --backend host --emulated-devices 1 --socket "$DIR/s.sock" --plugin "$PLUGIN" \
  2>"$DIR/serve.log" &
SERVE=$!
trap 'kill $SERVE 2>/dev/null; wait $SERVE 2>/dev/null; rm -rf "$DIR"' EXIT
for _ in $(seq 200); do [ -S "$DIR/s.sock" ] && break; sleep 0.05; done
"$BENCH" "unix://$DIR/s.sock" "$PLUGIN" "$TASKS" "$REPEATS"
