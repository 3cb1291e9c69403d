#!/bin/bash
# Issue 12's shared-pool targets, in one run (docs/benchmarks.md, "Shared pool (issue 12)"):
#   1. lease round trips (lease_bench) with 1 and 64 clients connected to a spawned `gpuflow serve`
#   2. no-op graphs (gpuflow_bench --gpu) on an embedded pool and on a connected one, interleaved
#   3. the seed workload (seed_bench.sh) embedded and connected (GPUFLOW_POOL), interleaved
#
#   bench/shared_pool_bench.sh [BUILD_DIR] [ROUNDS]      defaults: build-rel 3
#   ONLY=lease|graphs|seed restricts it to one part.
# Build in Release first (cmake -DCMAKE_BUILD_TYPE=Release, targets gpuflow_cli lease_bench
# gpuflow_bench seed_array). Prints JSON lines on stdout; progress on stderr.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-rel}
ROUNDS=${2:-3}
ONLY=${ONLY:-}
GPUFLOW=$BUILD/tools/gpuflow/gpuflow
for bin in "$GPUFLOW" "$BUILD/bench/lease_bench" "$BUILD/bench/gpuflow_bench" \
  "$BUILD/examples/seed_array"; do
  [ -x "$bin" ] || { echo "shared_pool_bench.sh: $bin not found: build it first" >&2; exit 2; }
done

if [ -z "$ONLY" ] || [ "$ONLY" = lease ]; then
  for r in $(seq "$ROUNDS"); do
    for k in 1 64; do
      echo "lease: round $r, $k client(s)" >&2
      "$BUILD/bench/lease_bench" --serve "$GPUFLOW" --clients "$k" --iters 20000 --devices 4
    done
  done
fi

# A service with the default embedded pool's devices: 2 emulated, 1 GiB, 10 GB/s.
dir=$(mktemp -d)
"$GPUFLOW" serve --backend host --emulated-devices 2 --socket "$dir/gpuflow.sock" \
  >/dev/null 2>&1 &
serve_pid=$!
trap 'kill $serve_pid 2>/dev/null; wait $serve_pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 200); do [ -S "$dir/gpuflow.sock" ] && break; sleep 0.05; done
endpoint=unix://$dir/gpuflow.sock

if [ -z "$ONLY" ] || [ "$ONLY" = graphs ]; then
  for r in $(seq "$ROUNDS"); do
    for g in "wide 100000 7" "chain 10000 21" "tree 65536 7"; do
      echo "graphs: round $r, $g" >&2
      # shellcheck disable=SC2086
      "$BUILD/bench/gpuflow_bench" $g --gpu --devices 2 --connected "$endpoint"
    done
  done
fi

if [ -z "$ONLY" ] || [ "$ONLY" = seed ]; then
  for r in $(seq "$ROUNDS"); do
    echo "seed: round $r" >&2
    first=embedded second=$endpoint
    if [ $((r % 2)) = 0 ]; then first=$endpoint second=embedded; fi
    for pool in "$first" "$second"; do
      line=$(GPUFLOW_POOL=$pool "$ROOT/bench/seed_bench.sh" "$BUILD/examples/seed_array" 20000 2000 3)
      echo "{\"pool\": \"${pool%%:*}\", ${line#\{}"
    done
  done
fi
