#!/usr/bin/env bash
# gpuflow inside a real Slurm (issue 28, item 4): Debian's slurm-wlm and munge, started here on
# loopback (slurm_cluster.sh: two nodes of two fake GPUs each) and stopped at the end, whatever
# happens, leaving no daemon. Two batch jobs, one per node, each with a pool of its own
# (`eval "$(gpuflow serve --per-job --daemon)"`) that its srun steps lease from:
# 1. shares: six steps leasing a whole GPU, then four leasing half of one, on the job's two GPUs:
#    on no device do the shares running at once add up past one, two halves do run on one device
#    together, and both devices are used (ledger_check.py); then two programs on the job's pool
#    (gpuflow run, connected through GPUFLOW_POOL) both run on its devices;
# 2. cancel: four steps hold half a GPU each; `scancel` ends the job, and within a second (times
#    GPUFLOW_TEST_TIME_FACTOR) the job's service has stopped, its directory (socket, saved grants)
#    is gone and no leased command is left.
# Exits 77 with the reason where it cannot run: not root, Slurm or munge missing, or a daemon that
# cannot start.
#   slurm_test.sh GPUFLOW_CLI
set -uo pipefail

cli=$(realpath "${1:?usage: $0 GPUFLOW_CLI}")
here=$(cd "$(dirname "$0")" && pwd)
factor=${GPUFLOW_TEST_TIME_FACTOR:-1}
skip() {
  echo "SKIP: $*"
  exit 77
}
[[ $(id -u) == 0 ]] || skip "needs root: slurmd runs jobs as their users, and the test's daemons as root"
dir=$(mktemp -d /tmp/gft-slurm-XXXXXX) || exit 1
chmod 0755 "$dir"
# shellcheck source=tests/slurm/slurm_cluster.sh
source "$here/slurm_cluster.sh"
cleanup() {
  slurm_cluster_stop
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
  echo "FAIL: $*"
  local f
  for f in "$dir"/*.out "$dir"/cluster/log/slurmctld.log; do
    [[ -s "$f" ]] && { echo "--- $f"; tail -n 30 "$f"; }
  done
  exit 1
}
seconds() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(seconds)" 'BEGIN { printf "%.2f", b - a }'; }
started=$(seconds)

# Not in $(...): the cluster's state must stay in this shell, for cleanup.
slurm_cluster_start "$dir/cluster" > "$dir/start.reason" || skip "$(cat "$dir/start.reason")"
echo "slurm up in $(since "$started") s"

# What every job's script starts with: the job's own pool on the job's two GPUs (emulated), its
# socket under the job's TMPDIR. (Item 1 of issue 28 makes the emulated devices the ones Slurm
# handed down in CUDA_VISIBLE_DEVICES: here the job has all of its node's.)
mkdir -m 0700 "$dir/jobtmp"
unset SLURM_TMPDIR  # a Slurm this test runs under must not move the jobs' sockets
serve_line='eval "$("$GPUFLOW_CLI" serve --per-job --daemon --backend host --emulated-devices 2 --cpu-workers 1)"'
export GPUFLOW_CLI=$cli TEST_DIR=$dir RECORD=$here/record_job.sh
export PROGRAM=$here/../../examples/json/gpu_pipeline.json
submit() {  # submit NAME SBATCH_OPTIONS...: runs $dir/NAME.sh; prints the job id
  local name=$1
  shift
  sbatch --parsable -N1 --gres=gpu:2 -J "$name" -o "$dir/$name.out" \
    --export="ALL,TMPDIR=$dir/jobtmp" "$@" "$dir/$name.sh"
}

# 2's job first, so that it holds one node while 1 runs on the other.
cat > "$dir/cancel.sh" << EOF
#!/bin/bash
$serve_line
echo "\$GPUFLOW_SERVE_PID" > "\$TEST_DIR/cancel.serve"
echo "\$GPUFLOW_POOL" > "\$TEST_DIR/cancel.pool"
for i in 0 1 2 3; do
  srun --overlap -n1 "\$GPUFLOW_CLI" lease --gpus 0.5 --name held\$i -- \
    bash -c 'echo \$\$ >> "\$TEST_DIR/cancel.leased"; exec sleep 300' &
done
wait
EOF
cancel_job=$(submit cancel) || fail "sbatch refused the cancel job"

cat > "$dir/shares.sh" << EOF
#!/bin/bash
set -e
$serve_line
echo "\$SLURMD_NODENAME" > "\$TEST_DIR/shares.node"
for i in 0 1 2 3 4 5; do
  srun --overlap -n1 "\$GPUFLOW_CLI" lease --gpus 1 -- "\$RECORD" "\$TEST_DIR/whole.ledger" whole\$i 1 0.3 &
done
wait
for i in 0 1 2 3; do
  srun --overlap -n1 "\$GPUFLOW_CLI" lease --gpus 0.5 -- "\$RECORD" "\$TEST_DIR/half.ledger" half\$i 0.5 1.5 &
done
wait
for i in 0 1; do  # programs on the job's pool, connected through GPUFLOW_POOL
  srun --overlap -n1 bash -c 'echo \$\$ > "\$TEST_DIR/program\$0.pid"; exec "\$GPUFLOW_CLI" run "\$1" --no-progress' \
    \$i "\$PROGRAM" > "\$TEST_DIR/program\$i.out" 2>&1 &
done
wait
EOF
shares_job=$(submit shares) || fail "sbatch refused the shares job"
slurm_wait_job "$shares_job" $((90 * factor)) || fail "the shares job failed"
python3 "$here/ledger_check.py" "$dir/whole.ledger" --devices 2 || fail "whole GPUs: see above"
python3 "$here/ledger_check.py" "$dir/half.ledger" --devices 2 --packed 0.5 ||
  fail "half GPUs: see above"
[[ $(wc -l < "$dir/whole.ledger") == 6 && $(wc -l < "$dir/half.ledger") == 4 ]] ||
  fail "not every step ran: $(cat "$dir/whole.ledger" "$dir/half.ledger")"
for i in 0 1; do
  grep -q "8 tasks: 8 succeeded" "$dir/program$i.out" || fail "program $i: $(cat "$dir/program$i.out")"
  grep -q "granted to client [0-9]* (pid $(cat "$dir/program$i.pid"), [^)]*): gpu:" "$dir/shares.out" ||
    fail "program $i ran on no device of the job's pool"
done

# 2: the cancel job holds four leases; scancel.
pool=""
for _ in $(seq $((200 * factor))); do
  pool=$(cat "$dir/cancel.pool" 2> /dev/null)
  [[ -n "$pool" ]] && [[ $("$cli" status --pool "$pool" --json 2> /dev/null |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["leases"]))' 2> /dev/null) == 4 ]] &&
    break
  sleep 0.1
done
[[ -n "$pool" ]] || fail "the cancel job's service never said where it listens"
"$cli" status --pool "$pool" > "$dir/cancel-status.out" 2>&1
[[ $(grep -c held "$dir/cancel-status.out") == 4 ]] || fail "the cancel job's four leases are not held"
[[ $(squeue -h -j "$cancel_job" -o %N) != $(cat "$dir/shares.node") ]] ||
  fail "both jobs ran on one node: the test wants the two"
serve_pid=$(cat "$dir/cancel.serve")
mapfile -t leased < "$dir/cancel.leased"
socket=${pool#unix://}
[[ -S "$socket" ]] || fail "no socket at $socket"
cancelled=$(seconds)
scancel "$cancel_job" || fail "scancel refused"
took=""
for _ in $(seq $((100 * factor))); do
  left=""
  for pid in "$serve_pid" "${leased[@]}"; do slurm_alive "$pid" && left+=" $pid"; done
  [[ -z "$left" && ! -e "$(dirname "$socket")" ]] && {
    took=$(since "$cancelled")
    break
  }
  sleep 0.02
done
[[ -n "$took" ]] ||
  fail "after scancel, still running:$left; left in the job's directory: $(ls -A "$(dirname "$socket")" 2>&1)"
echo "scancel: the job's service, its directory and its leased commands gone in $took s"
awk -v t="$took" -v f="$factor" 'BEGIN { exit !(t <= f) }' || fail "it took $took s after scancel, more than 1 s"
grep -q "has ended: the job is over\|Terminated: stopping" "$dir/cancel.out" ||
  fail "the service did not say why it stopped"

echo "total $(since "$started") s"
echo PASS
