#!/usr/bin/env bash
# gpuflow serve --config (issue 27, item 3): a TOML file holds serve's flags; the command line
# wins over it; a typo, a value of the wrong kind or one the flag's rule refuses stops the start
# naming the file, the line and the key, and so do a socket directory or a group that does not
# exist; SIGHUP re-reads [policy] without dropping a lease and
# the log says what changed.
#   serve_config.sh GPUFLOW_CLI
set -euo pipefail
cli=$1
factor=${GPUFLOW_TEST_TIME_FACTOR:-1}
dir=$(mktemp -d)
serve_pid=""
holder_pid=""
cleanup() {
  for p in $holder_pid $serve_pid; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$dir"/*.log; do
    [[ -f "$f" ]] && { echo "--- $f"; cat "$f"; }
  done
  exit 1
}
# expect_refused NAME TEXT [SOCKET]: serve with config NAME (and --socket SOCKET, default one in
# the test's directory; "" for the file's own) exits 2 and says TEXT.
expect_refused() {
  local rc=0 socket=("--socket" "${3-$dir/never.sock}")
  [[ -n "${3-x}" ]] || socket=()
  "$cli" serve --config "$dir/$1" "${socket[@]}" >"$dir/$1.out" 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || fail "$1: exit $rc, not 2: $(cat "$dir/$1.out")"
  grep -qF -- "$2" "$dir/$1.out" || fail "$1: no '$2' in: $(cat "$dir/$1.out")"
}
wait_for() {  # wait_for FILE TEXT
  for _ in $(seq $((100 * factor))); do
    grep -qF -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "no '$2' in $1"
}

# --- Refused at start, naming file, line and key.
printf '[pool]\nbackend = "host"\ncpu_worker = 2\n' >"$dir/typo.toml"
expect_refused typo.toml "$dir/typo.toml:3: key pool.cpu_worker: unknown"
printf '[pool]\n\ncpu_workers = "four"\n' >"$dir/kind.toml"
expect_refused kind.toml "$dir/kind.toml:3: key pool.cpu_workers: must be a number"
printf '[policy]\nuser_gpu_cap = -1\n' >"$dir/rule.toml"
expect_refused rule.toml "$dir/rule.toml:2: key policy.user_gpu_cap:"
printf '[pool]\nbackend = "quantum"\n' >"$dir/backend.toml"
expect_refused backend.toml "$dir/backend.toml:2: key pool.backend:"
printf '[pool\nbackend = "host"\n' >"$dir/syntax.toml"
expect_refused syntax.toml "$dir/syntax.toml:1: not TOML"
printf '[gpus]\ncount = 2\n' >"$dir/table.toml"
expect_refused table.toml "$dir/table.toml:1: unknown table [gpus]"
expect_refused missing.toml "$dir/missing.toml"
# Settings that are well formed but cannot be had: said as such, naming what is missing.
printf '[service]\nsocket = "%s/no/such/dir/gpuflow.sock"\n' "$dir" >"$dir/nodir.toml"
expect_refused nodir.toml "its directory $dir/no/such/dir does not exist" ""
printf '[pool]\nbackend = "host"\n[service]\ngroup = "gft-no-such-group-%s"\n' "$$" >"$dir/nogroup.toml"
expect_refused nogroup.toml "no group named 'gft-no-such-group-$$'"

# --- Settings from the file; a flag wins over its key.
cat >"$dir/serve.toml" <<EOF
[pool]
backend = "host"
emulated_devices = 3
cpu_workers = 1

[service]
socket = "$dir/gpuflow.sock"

[policy]
usage_half_life = 60
user_gpu_cap = 0
EOF
"$cli" serve --config "$dir/serve.toml" --emulated-devices 2 >"$dir/serve.log" 2>&1 &
serve_pid=$!
wait_for "$dir/serve.log" "listening on unix://$dir/gpuflow.sock"
status=$("$cli" status --pool "unix://$dir/gpuflow.sock" --json)
devices=$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])["devices"]))' "$status")
[[ "$devices" == 2 ]] || fail "--emulated-devices 2 should win over the file's 3: $devices devices"

# --- SIGHUP re-reads [policy]; a lease held stays held; the log says what changed.
"$cli" lease --pool "unix://$dir/gpuflow.sock" --gpus 2 -- sleep 600 >"$dir/holder.log" 2>&1 &
holder_pid=$!
wait_for_lease() {
  for _ in $(seq $((100 * factor))); do
    n=$("$cli" status --pool "unix://$dir/gpuflow.sock" --json |
      python3 -c 'import json,sys; print(len(json.load(sys.stdin)["leases"]))')
    [[ "$n" == "$1" ]] && return 0
    sleep 0.1
  done
  fail "expected $1 leases, saw $n"
}
wait_for_lease 1
sed -i 's/^user_gpu_cap = 0/user_gpu_cap = 1/; s/^usage_half_life = 60/usage_half_life = 30/' \
  "$dir/serve.toml"
sed -i 's/^cpu_workers = 1/cpu_workers = 2/' "$dir/serve.toml"
kill -HUP "$serve_pid"
wait_for "$dir/serve.log" "user_gpu_cap 0 -> 1"
grep -qF "pool.cpu_workers changed in $dir/serve.toml: it takes effect at the next start" \
  "$dir/serve.log" || fail "the log does not say a start-time key changed"
kill -0 "$serve_pid" || fail "SIGHUP stopped the service"
wait_for_lease 1  # the lease above the new cap stays held
rc=0
"$cli" lease --pool "unix://$dir/gpuflow.sock" --gpus 2 --timeout 5 -- true >"$dir/capped.log" 2>&1 ||
  rc=$?
[[ $rc -eq 2 ]] || fail "a 2-GPU lease above the new cap of 1 should be refused (exit $rc)"
grep -qF "a user may hold at most 1" "$dir/capped.log" ||
  fail "the refusal does not name the new cap: $(cat "$dir/capped.log")"

# --- A file broken after start changes nothing and says why.
printf '[policy]\nuser_gpu_cap = "many"\n' >"$dir/serve.toml"
kill -HUP "$serve_pid"
wait_for "$dir/serve.log" "not re-read, the policy stays as it was"
kill -0 "$serve_pid" || fail "a broken file on SIGHUP stopped the service"

kill "$holder_pid"
wait "$holder_pid" 2>/dev/null || true
holder_pid=""
kill "$serve_pid"
wait "$serve_pid" || fail "serve did not stop cleanly on SIGTERM"
serve_pid=""
echo PASS
