#!/usr/bin/env bash
# The dashboard's cost on the no-op wide benchmark (issue 15: at most 10 %): gpuflow_bench wide
# 100,000 run alternately without a dashboard and with one that has a live page open (a client
# following /events, as the browser does) and /metrics scraped every second. Rounds alternate
# so that load from elsewhere hits both sides alike. Prints one line per run and the medians.
#
#   bench/dashboard_overhead.sh build-rel/bench/gpuflow_bench [ROUNDS=6] [REPEATS=60]
#
# REPEATS runs of the 100,000-task graph per process (about 3-6 s) so that several scrapes and
# a few dozen page updates land inside the timed runs. Both sides wait 1 s after creating their
# pool (GPUFLOW_BENCH_SETTLE_S) so that the watcher has started and attached before timing: what
# is measured is a pool being watched, not a watcher starting up beside it.
set -euo pipefail
bin=${1:?usage: $0 GPUFLOW_BENCH [ROUNDS] [REPEATS]}
rounds=${2:-6}
reps=${3:-60}
port=${GPUFLOW_BENCH_DASHBOARD_PORT:-18799}
tmp=$(mktemp -d)
here=$(cd "$(dirname "$0")" && pwd)
trap 'rm -rf "$tmp"' EXIT

rate() { sed -n 's/.*"tasks_per_s": \([0-9.]*\).*/\1/p'; }

without=() with=()
events=0 scrapes=0
for r in $(seq "$rounds"); do
  a=$(GPUFLOW_BENCH_SETTLE_S=1 GPUFLOW_DASHBOARD=off "$bin" wide 100000 "$reps" | rate)
  # One watcher process (a page following /events, /metrics every second) that waits for the
  # benchmark's pool to come up.
  python3 "$here/dashboard_watch.py" "$port" >"$tmp/watch" &
  watcher=$!
  b=$(GPUFLOW_BENCH_SETTLE_S=1 GPUFLOW_DASHBOARD=127.0.0.1:$port "$bin" wide 100000 "$reps" | rate)
  kill -TERM "$watcher"
  wait "$watcher" || true
  read -r e s <"$tmp/watch"
  events=$((events + e))
  scrapes=$((scrapes + s))
  echo "round $r: without $a tasks/s, with dashboard + page + scrapes $b tasks/s ($e updates, $s scrapes)"
  without+=("$a")
  with+=("$b")
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
m0=$(median "${without[@]}")
m1=$(median "${with[@]}")
echo "page updates received: $events; /metrics scrapes: $scrapes (all rounds)"
awk -v a="$m0" -v b="$m1" 'BEGIN {printf "median without: %.0f tasks/s, with: %.0f tasks/s, overhead: %.1f %%\n", a, b, (1 - b / a) * 100}'
