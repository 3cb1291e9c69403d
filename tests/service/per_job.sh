#!/usr/bin/env bash
# gpuflow serve --per-job (issue 28, item 2) without a Slurm: SLURM_JOB_ID and TMPDIR set by
# hand. The socket goes in $TMPDIR/gpuflow-job-ID (a path with a space and a quote here);
# `eval "$(gpuflow serve --per-job --daemon)"`
# exports GPUFLOW_POOL, which `gpuflow lease` then uses; the service stops and its directory goes
# once the script that started it (its process group's leader) ends; no job id, a job id that is
# not one, a directory someone else could enter and --daemon alone are refused saying why.
# (tests/slurm runs the same under a real Slurm.)
#   per_job.sh GPUFLOW_CLI
set -uo pipefail
cli=$1
factor=${GPUFLOW_TEST_TIME_FACTOR:-1}
dir=$(mktemp -d)
cleanup() {
  local pid
  pid=$(cat "$dir/serve.pid" 2> /dev/null) && kill "$pid" 2> /dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  [[ -f "$dir/job.log" ]] && sed 's/^/  job: /' "$dir/job.log"
  exit 1
}
# refused TEXT ARGS...: serve ARGS exits 2 saying TEXT.
refused() {
  local text=$1 rc=0
  shift
  "$cli" serve "$@" > "$dir/refused.out" 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || fail "serve $*: exit $rc, not 2: $(cat "$dir/refused.out")"
  grep -qF -- "$text" "$dir/refused.out" || fail "serve $*: no '$text' in: $(cat "$dir/refused.out")"
}

# A space and a quote in the path: --daemon's exports must survive `eval`.
export TMPDIR="$dir/the job's tmp"
mkdir "$TMPDIR"
# Nothing from a Slurm or a GPU machine the test itself may run under.
unset SLURM_TMPDIR GPUFLOW_POOL CUDA_VISIBLE_DEVICES NVIDIA_VISIBLE_DEVICES SLURM_STEP_GPUS \
  SLURM_JOB_GPUS
(unset SLURM_JOB_ID && refused "SLURM_JOB_ID is not set" --per-job) || exit 1
SLURM_JOB_ID=../x refused "SLURM_JOB_ID '../x' is not a job id" --per-job
refused "--daemon requires --per-job" --daemon
mkdir -m 0755 "$TMPDIR/gpuflow-job-5"
SLURM_JOB_ID=5 refused "$TMPDIR/gpuflow-job-5 exists but is not a directory of this user" --per-job
[[ -d "$TMPDIR/gpuflow-job-5" ]] || fail "a directory it refused was removed"

# The job: its own process group (as Slurm starts a batch script), a service, a lease through the
# exported GPUFLOW_POOL, a second service in the same job refused; then the script ends.
cat > "$dir/job.sh" << 'EOF'
set -e
eval "$("$1" serve --per-job --daemon --backend host --emulated-devices 2 --cpu-workers 1)"
echo "$GPUFLOW_SERVE_PID" > "$TMPDIR/../serve.pid"
echo "pool=$GPUFLOW_POOL"
"$1" lease --gpus 0.5 -- sh -c 'echo "leased=$GPUFLOW_DEVICES"'
"$1" serve --per-job --backend host --emulated-devices 1 2>&1 || echo "second=$?"
EOF
SLURM_JOB_ID=41 setsid bash "$dir/job.sh" "$cli" > "$dir/job.log" 2>&1 || fail "the job failed"
grep -qxF "pool=unix://$TMPDIR/gpuflow-job-41/gpuflow.sock" "$dir/job.log" ||
  fail "GPUFLOW_POOL is not the job's socket"
grep -qx "leased=0" "$dir/job.log" || fail "no lease through GPUFLOW_POOL"
grep -qx "second=2" "$dir/job.log" || fail "a second service of the job was not refused"
grep -qF "already listens at $TMPDIR/gpuflow-job-41" "$dir/job.log" || fail "the second service does not say why"
pid=$(cat "$dir/serve.pid")
for _ in $(seq $((50 * factor))); do
  kill -0 "$pid" 2> /dev/null || break
  sleep 0.1
done
kill -0 "$pid" 2> /dev/null && fail "the service outlived its job's script"
grep -q "the job's script (pid [0-9]*) has ended" "$dir/job.log" || fail "it did not say why it stopped"
[[ -e "$TMPDIR/gpuflow-job-41" ]] &&
  fail "the job's directory is left behind: $(ls -la "$TMPDIR/gpuflow-job-41")"
echo PASS
