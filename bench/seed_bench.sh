#!/bin/bash
# Times the seed workload with gpuflow: x = normal(10, 1, (N, N)) in (C, C) chunks,
# (x + 1)[::2, ::2].sum(), as ../shared/bench/seed_workload.py does for numpy and Dask.
#
#   bench/seed_bench.sh [SEED_ARRAY_BIN] [N] [C] [REPEATS]
#   defaults: build-rel/examples/seed_array 20000 2000 3
#
# seed_array runs one small warm-up, then REPEATS timed runs (graph build + submit + wait, like
# seed_workload.py's "build the dask array + compute"), checks the sum, and prints a last JSON line
# with seed_workload.py's keys (peer "seed-gpuflow"); this script prints just that line, so it can
# be appended to run_peers.sh's results.jsonl and summarised by summarize.py.
# Build it in Release first: cmake -S . -B build-rel -G Ninja -DCMAKE_BUILD_TYPE=Release &&
#                             cmake --build build-rel --target seed_array
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/build-rel/examples/seed_array}
N=${2:-20000}
C=${3:-2000}
REPEATS=${4:-3}
if [ ! -x "$BIN" ]; then
  echo "seed_bench.sh: $BIN not found: build the seed_array target first" >&2
  exit 2
fi
out=$("$BIN" "$N" "$C" "$REPEATS")
echo "$out" | grep -v '^{' >&2
echo "$out" | grep '^{'
