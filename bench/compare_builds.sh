#!/usr/bin/env bash
# Before/after of a change, interleaved in one run so both builds see the same machine: the
# scheduler's no-op graphs (gpuflow_bench wide/chain/tree), lease round trips (lease_bench with 1
# and 64 clients) and the connected pool (gpuflow_bench --gpu --connected against a service of the
# same build). Each round runs old then new, the order flipping every round.
#
#   bench/compare_builds.sh OLD_BUILD NEW_BUILD [ROUNDS]   # Release build trees; ROUNDS default 5
#   CASES="lease1 lease64 floor" bench/compare_builds.sh ...   # only these cases
#
# Prints one markdown table: per-round figures, the medians and new/old of the medians (tasks/s
# for graphs, higher is better; µs per acquire + release for leases, lower is better). `floor`
# (issue 29) is two bare unix-socket round trips between two processes (bench/unix_rtt), what a
# lease's acquire + release is held to, measured in the same rounds; a build without unix_rtt
# borrows the other's.
set -euo pipefail
old=$1 new=$2 rounds=${3:-5}
for b in "$old" "$new"; do
  for f in bench/gpuflow_bench bench/lease_bench tools/gpuflow/gpuflow; do
    [[ -x "$b/$f" ]] || { echo "compare_builds: $b/$f is missing (build it in Release)" >&2; exit 2; }
  done
done
work=$(mktemp -d)
services=()
cleanup() {
  for pid in "${services[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# One service per build for the connected runs, each on its own socket.
for side in old new; do
  b=${!side}
  "$b/tools/gpuflow/gpuflow" serve --backend host --emulated-devices 2 \
    --socket "$work/$side.sock" 2>"$work/$side-serve.log" &
  services+=($!)
done
for side in old new; do
  for _ in $(seq 100); do [[ -S "$work/$side.sock" ]] && break; sleep 0.1; done
  [[ -S "$work/$side.sock" ]] || { echo "compare_builds: the $side service did not start" >&2; exit 1; }
done

# case NAME: what one measurement runs, given the build directory $b and its socket $sock.
measure() {
  local name=$1 b=$2 sock=$3
  case $name in
    wide) "$b/bench/gpuflow_bench" wide 100000 5 ;;
    chain) "$b/bench/gpuflow_bench" chain 10000 5 ;;
    tree) "$b/bench/gpuflow_bench" tree 65536 5 ;;
    lease1) "$b/bench/lease_bench" --serve "$b/tools/gpuflow/gpuflow" --clients 1 --iters 5000 \
      --devices 4 | head -1 ;;
    lease64) "$b/bench/lease_bench" --serve "$b/tools/gpuflow/gpuflow" --clients 64 --iters 20000 \
      --devices 4 | head -1 ;;
    connected-wide) "$b/bench/gpuflow_bench" wide 100000 5 --gpu --devices 2 \
      --connected "unix://$sock" ;;
    connected-tree) "$b/bench/gpuflow_bench" tree 65536 5 --gpu --devices 2 \
      --connected "unix://$sock" ;;
    floor)
      local rtt=$b/bench/unix_rtt
      [[ -x $rtt ]] || rtt=$old/bench/unix_rtt
      [[ -x $rtt ]] || rtt=$new/bench/unix_rtt
      "$rtt" 5000 | python3 -c 'import json, sys
d = json.loads(sys.stdin.readline())
d["median_us"] *= 2  # an acquire and a release: two round trips
print(json.dumps(d))' ;;
  esac
}

read -ra cases <<< "${CASES:-wide chain tree lease1 lease64 connected-wide connected-tree floor}"
for r in $(seq "$rounds"); do
  order=(old new)
  ((r % 2 == 0)) && order=(new old)
  for c in "${cases[@]}"; do
    for side in "${order[@]}"; do
      b=${!side}
      line=$(measure "$c" "$b" "$work/$side.sock" | grep '^{' | tail -1)
      echo "$side $c $line" >>"$work/results"
      echo "round $r $side $c: $line" >&2
    done
  done
done

python3 - "$work/results" <<'EOF'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    side, case, js = line.split(' ', 2)
    d = json.loads(js)
    v = d['tasks_per_s'] / 1e6 if 'tasks_per_s' in d else d['median_us']
    rows.setdefault(case, {}).setdefault(side, []).append(v)
print('| case | unit | old per round | old median | new per round | new median | new / old |')
print('| --- | --- | --- | --- | --- | --- | --- |')
for case, sides in rows.items():
    unit = ('µs per lease' if case.startswith('lease') else
            'µs, 2 bare round trips' if case == 'floor' else 'M tasks/s')
    o, n = sides['old'], sides['new']
    mo, mn = statistics.median(o), statistics.median(n)
    fmt = lambda xs: ' '.join(f'{x:.3g}' for x in xs)
    print(f'| {case} | {unit} | {fmt(o)} | {mo:.3g} | {fmt(n)} | {mn:.3g} | {mn / mo:.2f} |')
EOF
