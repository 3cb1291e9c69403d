#!/usr/bin/env bash
# `gpuflow serve` started inside an allocation serves exactly the devices handed down to it: with
# CUDA_VISIBLE_DEVICES=1,3 on 4 emulated devices it serves 2, which keep their UUIDs; status says
# where the list came from; `gpuflow lease` hands out those UUIDs; a pool connected to it mirrors
# them, and a pool started inside a lease drives the leased device. A list naming a device the
# node lacks stops serve at start, naming it.
#   handed_down_service_test.sh GPUFLOW_CLI
set -euo pipefail
cli=$1
factor=${GPUFLOW_TEST_TIME_FACTOR:-1}
dir=$(mktemp -d)
serve_pid=""
cleanup() {
  [[ -n $serve_pid ]] && kill "$serve_pid" 2>/dev/null
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  [[ -f $dir/serve.log ]] && { echo "--- serve.log"; cat "$dir/serve.log"; }
  exit 1
}
unset CUDA_VISIBLE_DEVICES SLURM_STEP_GPUS SLURM_JOB_GPUS NVIDIA_VISIBLE_DEVICES GPUFLOW_POOL
emul() { printf 'GPU-00000000-gpuf-emul-0000-%012d' "$1"; }
pool=unix://$dir/gf.sock

# --- A missing device stops the start, naming variable and entry.
rc=0
CUDA_VISIBLE_DEVICES=1,5 "$cli" serve --backend host --emulated-devices 4 \
  --socket "$dir/never.sock" >"$dir/refused.log" 2>&1 || rc=$?
[[ $rc -eq 2 ]] || fail "serve with a missing device: exit $rc, not 2: $(cat "$dir/refused.log")"
grep -qF "CUDA_VISIBLE_DEVICES='1,5' names device '5', which does not exist" "$dir/refused.log" ||
  fail "the missing device is not named: $(cat "$dir/refused.log")"

# --- Serving the devices handed down.
CUDA_VISIBLE_DEVICES=1,3 "$cli" serve --backend host --emulated-devices 4 --cpu-workers 2 \
  --socket "$dir/gf.sock" >"$dir/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq $((100 * factor))); do
  grep -q "listening on" "$dir/serve.log" && break
  sleep 0.1
done
grep -qF "serving 2 device(s) (host; CUDA_VISIBLE_DEVICES=1,3)" "$dir/serve.log" ||
  fail "serve does not say which devices it serves"

status=$("$cli" status --pool "$pool")
grep -q '^devices: 2 (CUDA_VISIBLE_DEVICES=1,3)$' <<<"$status" || fail "status text: $status"
json=$("$cli" status --pool "$pool" --json)
got=$(python3 -c 'import json,sys; s=json.loads(sys.argv[1]);
print(s["devices_source"], *[d["uuid"] for d in s["devices"]])' "$json")
[[ $got == "CUDA_VISIBLE_DEVICES=1,3 $(emul 1) $(emul 3)" ]] || fail "status --json: $got"

leased=$("$cli" lease --pool "$pool" --gpus 2 --timeout 10 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"')
[[ $leased == "$(emul 1),$(emul 3)" ]] || fail "the lease handed out $leased"

# A pool connected to the service mirrors its devices, whatever its own environment says.
out=$(CUDA_VISIBLE_DEVICES=0 "$cli" info --pool "$pool")
grep -q "^devices: 2 (the service's)$" <<<"$out" || fail "connected pool: $out"
grep -q "$(emul 3)\$" <<<"$out" || fail "connected pool's devices: $out"

# A pool started inside a lease (as a Slurm step's program would be) drives the leased device.
out=$("$cli" lease --pool "$pool" --gpus 1 --timeout 10 -- \
  env GPUFLOW_POOL=embedded "$cli" info --backend host)
grep -q "^devices: 1 (CUDA_VISIBLE_DEVICES=GPU-00000000-gpuf-emul-0000-00000000000[13])$" \
  <<<"$out" || fail "pool inside a lease: $out"

kill -TERM "$serve_pid"
wait "$serve_pid" || fail "serve did not stop cleanly"
serve_pid=""
echo PASS
