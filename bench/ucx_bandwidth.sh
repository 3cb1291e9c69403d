#!/bin/bash
# The UCX data plane against its targets (issue 13; docs/benchmarks.md, "UCX data plane"): put
# bandwidth client -> `gpuflow serve` at 64 KiB, 1 MiB, 16 MiB and 256 MiB, one put at a time and
# four in flight (four threads, as perftest keeps a window of sends), beside ucx_perftest's
# tag_bw on the same transports (two local processes) and a memcpy ceiling; the small-message
# round trip beside tag_lat. Same UCX_TLS for both: what the service forces (self,posix,cma).
# REMOTE=1 measures a remote client instead (docs/transport.md, "Remote clients"): the client
# connects to tcp://127.0.0.1 with a token, its bytes go over UCX's TCP through the service's
# gpuflow-relay, and ucx_perftest runs with UCX_TLS=tcp.
#
#   [REMOTE=1] bench/ucx_bandwidth.sh [BUILD_DIR] [ROUNDS]     defaults: build 5
# Needs gpuflow_cli and ucx_bandwidth built in BUILD_DIR, and ucx_perftest (ucx-utils).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
ROUNDS=${2:-5}
GPUFLOW=$BUILD/tools/gpuflow/gpuflow
BENCH=$BUILD/bench/ucx_bandwidth
for bin in "$GPUFLOW" "$BENCH"; do
  [ -x "$bin" ] || { echo "ucx_bandwidth.sh: $bin not found: build it first" >&2; exit 2; }
done
command -v ucx_perftest >/dev/null || { echo "ucx_bandwidth.sh: no ucx_perftest (ucx-utils)" >&2; exit 2; }
REMOTE=${REMOTE:-0}
DIR=$(mktemp -d)
if [ "$REMOTE" = 1 ]; then
  export UCX_TLS=tcp GPUFLOW_TOKEN_FILE=$DIR/token
  "$GPUFLOW" serve --backend host --emulated-devices 1 --socket "$DIR/s.sock" \
    --listen 127.0.0.1:0 --token-file "$DIR/token" >"$DIR/serve.out" 2>"$DIR/serve.log" &
else
  export UCX_TLS=self,posix,cma
  "$GPUFLOW" serve --backend host --emulated-devices 1 --socket "$DIR/s.sock" 2>"$DIR/serve.log" &
fi
SERVE=$!
trap 'kill $SERVE 2>/dev/null; wait $SERVE 2>/dev/null; rm -rf "$DIR"' EXIT
for _ in $(seq 200); do [ -S "$DIR/s.sock" ] && break; sleep 0.05; done
EP=unix://$DIR/s.sock
if [ "$REMOTE" = 1 ]; then
  for _ in $(seq 200); do grep -q 'tcp://' "$DIR/serve.out" && break; sleep 0.05; done
  EP=$(grep -o 'tcp://[0-9.:]*' "$DIR/serve.out")
fi
PORT=$((20000 + RANDOM % 20000))

# perftest TEST SIZE ITERS -> the "Final:" line's bandwidth (MiB/s) or latency (usec, one way)
perftest() {
  ucx_perftest -p "$PORT" >/dev/null 2>&1 &
  local server=$!
  sleep 0.3
  local line
  line=$(ucx_perftest 127.0.0.1 -p "$PORT" -t "$1" -s "$2" -n "$3" 2>/dev/null | grep '^Final:')
  wait $server || true
  if [ "$1" = tag_lat ]; then echo "$line" | awk '{print $4}'; else echo "$line" | awk '{print $6}'; fi
}

iters_for() {
  case $1 in
    65536) echo 20000 ;; 1048576) echo 2000 ;; 16777216) echo 200 ;; *) echo 20 ;;
  esac
}

# median VALUES...: the middle one (the lower middle for an even count)
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

echo "# $(date -u +%FT%TZ), $(nproc) CPU(s), client at $EP, UCX_TLS=$UCX_TLS, $ROUNDS round(s) interleaved, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# per round: put / put, 4 in flight / perftest tag_bw / memcpy (MiB/s); then the medians"
printf '%-10s %14s %14s %14s %8s %8s %14s\n' size put_MiB/s put4_MiB/s perftest_MiB/s ratio ratio4 memcpy_MiB/s
for size in 65536 1048576 16777216 268435456; do
  n=$(iters_for "$size")
  puts=() put4s=() pts=() mcs=()
  # Four 256 MiB blobs, each replaced while its old bytes are kept, would pass the 1 GiB cap.
  k=4; [ "$size" -gt 67108864 ] && k=1
  for r in $(seq "$ROUNDS"); do
    puts+=("$("$BENCH" put "$EP" "$size" "$n" | sed 's/.*"mib_per_s":\([0-9.]*\).*/\1/')")
    put4s+=("$("$BENCH" put "$EP" "$size" "$n" "$k" | sed 's/.*"mib_per_s":\([0-9.]*\).*/\1/')")
    pts+=("$(perftest tag_bw "$size" "$n")")
    mcs+=("$("$BENCH" memcpy "$size" "$n" | sed 's/.*"mib_per_s":\([0-9.]*\).*/\1/')")
    echo "#   $size round $r: ${puts[-1]} / ${put4s[-1]} / ${pts[-1]} / ${mcs[-1]}"
  done
  put=$(median "${puts[@]}") put4=$(median "${put4s[@]}") pt=$(median "${pts[@]}")
  mc=$(median "${mcs[@]}")
  printf '%-10s %14s %14s %14s %8s %8s %14s\n' "$size" "$put" "$put4" "$pt" \
    "$(echo "$put $pt" | awk '{printf "%.2f", $1 / $2}')" \
    "$(echo "$put4 $pt" | awk '{printf "%.2f", $1 / $2}')" "$mc"
done
rtts=() lats=()
for r in $(seq "$ROUNDS"); do
  rtts+=("$("$BENCH" rtt "$EP" 20000)")
  lats+=("$(perftest tag_lat 8 100000)")
  echo "#   round trip round $r: ${rtts[-1]}; tag_lat ${lats[-1]} usec one way"
done
gets=() putl=()
for j in "${rtts[@]}"; do
  gets+=("$(echo "$j" | sed 's/.*"get_usec_median":\([0-9.]*\).*/\1/')")
  putl+=("$(echo "$j" | sed 's/.*"put_usec_median":\([0-9.]*\).*/\1/')")
done
lat=$(median "${lats[@]}")
echo "round trip (8 B), median of round medians: get $(median "${gets[@]}") usec, put $(median "${putl[@]}") usec"
echo "ucx_perftest tag_lat 8 B, median: ${lat} usec one way, $(echo "$lat" | awk '{printf "%.2f", 2 * $1}') usec round trip"
echo "transports: $("$BENCH" put "$EP" 1048576 1 | sed 's/.*"transports":"\([^"]*\)".*/\1/')"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
