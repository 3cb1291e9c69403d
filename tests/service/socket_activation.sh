#!/usr/bin/env bash
# gpuflow serve under systemd (issue 27, item 2), without a running systemd:
# systemd-socket-activate listens as gpuflow.socket would and starts `gpuflow serve` on the first
# connection with the socket handed over (LISTEN_FDS), so that first client is served; the
# service tells NOTIFY_SOCKET it is ready and, on SIGTERM, that it stops; its stop leaves the
# socket file to its owner; a LISTEN_FDS that does not match is refused saying why; and
# systemd-analyze verify accepts the units.
#   socket_activation.sh GPUFLOW_CLI SOURCE_DIR
set -euo pipefail
cli=$1 source_dir=$2
factor=${GPUFLOW_TEST_TIME_FACTOR:-1}
for tool in systemd-socket-activate python3; do
  command -v "$tool" >/dev/null || {
    echo "SKIPPED: $tool is not installed (Debian: systemd, python3)"
    exit 77
  }
done
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
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

# --- A LISTEN_FDS that does not match is refused, saying what.
refused() {  # refused TEXT ENV...
  local want=$1 rc=0
  shift
  env "$@" "$cli" serve --backend host --emulated-devices 1 --socket "$dir/x.sock" \
    >"$dir/refused.log" 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || fail "with $*: exit $rc, not 2"
  grep -qF -- "$want" "$dir/refused.log" || fail "with $*: no '$want' in $(cat "$dir/refused.log")"
}
refused "is not this process" LISTEN_FDS=1 LISTEN_PID=1
# The pid is the command's own: exec keeps it.
rc=0
sh -c 'LISTEN_PID=$$ LISTEN_FDS=2 exec "$0" serve --backend host --emulated-devices 1' "$cli" \
  >"$dir/two.log" 2>&1 || rc=$?
[[ $rc -eq 2 ]] && grep -qF "takes one socket" "$dir/two.log" ||
  fail "LISTEN_FDS=2: exit $rc: $(cat "$dir/two.log")"
# fd 3 a regular file, not a socket.
rc=0
sh -c 'exec 3<"$1"; LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" serve --backend host' "$cli" "$0" \
  >"$dir/file.log" 2>&1 || rc=$?
[[ $rc -eq 2 ]] && grep -qF "not a unix stream socket that listens" "$dir/file.log" ||
  fail "a file as fd 3: exit $rc: $(cat "$dir/file.log")"

# --- NOTIFY_SOCKET: a datagram socket that records what the service says.
python3 - "$dir/notify.sock" "$dir/notify.log" <<'EOF' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as log:
    while True:
        log.write(s.recv(4096).decode().replace("\n", " ") + "\n")
EOF
pids+=($!)
for _ in $(seq 50); do [[ -S "$dir/notify.sock" ]] && break; sleep 0.1; done

# --- The first client starts the service on the socket handed over.
sock=$dir/run/gpuflow.sock
mkdir "$dir/run"
# The activator starts the command with a fresh environment: -E passes what systemd would set,
# and the sanitizers' and UCX's settings of the build under test.
pass_env=(-E "NOTIFY_SOCKET=$dir/notify.sock")
for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS UCX_MEM_EVENTS; do
  [[ -n "${!v:-}" ]] && pass_env+=(-E "$v")
done
systemd-socket-activate -l "$sock" "${pass_env[@]}" \
  "$cli" serve --backend host --emulated-devices 2 >"$dir/serve.log" 2>&1 &
activator=$!
pids+=("$activator")
for _ in $(seq $((50 * factor))); do [[ -S "$sock" ]] && break; sleep 0.1; done
[[ -S "$sock" ]] || fail "systemd-socket-activate did not listen on $sock"
grep -q "listening" "$dir/serve.log" 2>/dev/null && fail "the service started before any client"
got=$("$cli" lease --pool "unix://$sock" --gpus 1 -- sh -c 'echo "leased $GPUFLOW_DEVICES"') ||
  fail "the first client was not served"
[[ "$got" == "leased "[01] ]] || fail "lease printed '$got'"
grep -qF "listening on unix://$sock" "$dir/serve.log" || fail "serve does not say where it listens"
grep -qF "the socket systemd handed over" "$dir/serve.log" ||
  fail "serve does not say the socket was handed over"
for _ in $(seq $((50 * factor))); do grep -q "READY=1" "$dir/notify.log" && break; sleep 0.1; done
grep -q "READY=1" "$dir/notify.log" || fail "serve did not tell NOTIFY_SOCKET it is ready"
"$cli" status --pool "unix://$sock" >/dev/null || fail "status on the handed-over socket"

# --- SIGTERM: a clean stop, STOPPING=1 said, and the socket file left to its owner.
kill "$activator"  # exec'd: the activator's pid is the service's
wait "$activator" || fail "serve did not stop cleanly on SIGTERM"
for _ in $(seq 50); do grep -q "STOPPING=1" "$dir/notify.log" && break; sleep 0.1; done
grep -q "STOPPING=1" "$dir/notify.log" || fail "serve did not say STOPPING=1"
[[ -S "$sock" ]] || fail "the service removed the socket file systemd owns"

# --- The units, as systemd would load them.
if command -v systemd-analyze >/dev/null; then
  mkdir "$dir/units"
  cp "$source_dir/packaging/systemd/gpuflow.socket" "$source_dir/packaging/systemd/gpuflow.service" \
    "$dir/units/"
  out=$(cd "$dir/units" && systemd-analyze verify --man=no ./gpuflow.socket ./gpuflow.service 2>&1 |
    grep -v "Command /usr/bin/gpuflow is not executable" || true)
  [[ -z "$out" ]] || fail "systemd-analyze verify: $out"
fi
echo PASS
