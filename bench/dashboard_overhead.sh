#!/usr/bin/env bash
# The dashboard's cost on the no-op wide benchmark (issue 15: at most 10 %): gpuflow_bench wide
# 100,000 run alternately without a dashboard and with one that has a live page open (a client
# following /events, as the browser does) and /metrics scraped every second. Rounds alternate
# so that load from elsewhere hits both sides alike. Prints one line per run and the medians.
#
#   bench/dashboard_overhead.sh build-rel/bench/gpuflow_bench [ROUNDS=6] [REPEATS=60]
#
# REPEATS runs of the 100,000-task graph per process (about 3-6 s) so that several scrapes and
# a few dozen page updates land inside the timed runs.
set -euo pipefail
bin=${1:?usage: $0 GPUFLOW_BENCH [ROUNDS] [REPEATS]}
rounds=${2:-6}
reps=${3:-60}
port=${GPUFLOW_BENCH_DASHBOARD_PORT:-18799}
tmp=$(mktemp -d)
watchers=()
stop_watchers() {
  for p in "${watchers[@]}"; do kill -- "-$p" 2>/dev/null || true; done
  watchers=()
}
trap 'stop_watchers; rm -rf "$tmp"' EXIT

rate() { sed -n 's/.*"tasks_per_s": \([0-9.]*\).*/\1/p'; }

without=() with=()
for r in $(seq "$rounds"); do
  a=$(GPUFLOW_DASHBOARD=off "$bin" wide 100000 "$reps" | rate)
  # The watchers retry until the benchmark's pool is up, then stay attached to it.
  setsid bash -c "while :; do curl -sN --max-time 120 http://127.0.0.1:$port/events \
    >>'$tmp/events' 2>/dev/null; sleep 0.02; done" &
  watchers+=($!)
  setsid bash -c "while :; do curl -s --max-time 2 http://127.0.0.1:$port/metrics \
    >>'$tmp/metrics' 2>/dev/null; sleep 1; done" &
  watchers+=($!)
  b=$(GPUFLOW_DASHBOARD=127.0.0.1:$port "$bin" wide 100000 "$reps" | rate)
  stop_watchers
  echo "round $r: without $a tasks/s, with dashboard + page + scrapes $b tasks/s"
  without+=("$a")
  with+=("$b")
done
events=$(grep -c '^data: ' "$tmp/events" || true)
scrapes=$(grep -c '^# TYPE gpuflow_tasks gauge' "$tmp/metrics" || true)
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
m0=$(median "${without[@]}")
m1=$(median "${with[@]}")
echo "page updates received: $events; /metrics scrapes: $scrapes"
awk -v a="$m0" -v b="$m1" 'BEGIN {printf "median without: %.0f tasks/s, with: %.0f tasks/s, overhead: %.1f %%\n", a, b, (1 - b / a) * 100}'
