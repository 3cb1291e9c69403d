#!/usr/bin/env bash
# A Slurm of the test's own, on loopback (sourced by slurm_test.sh): munged with its own key and
# socket, slurmctld and two slurmd (nodes n1 and n2, one host: Debian's slurmd is built for
# several per host, `slurmd -N NAME`), each node with two fake GPUs (character devices the test
# makes, as gres.conf requires) under GresTypes=gpu. Each slurmd, and so every job step on its
# node, runs in a mount namespace of its own with a /tmp of its own (a tmpfs), as two hosts
# would: the cluster's directory, the directory it is in and the repository stay where they are. Everything lives in one directory: config,
# state, spool, logs, pid files; its ports are free ones picked at random, never Slurm's defaults,
# so a Slurm the machine already runs is neither used nor disturbed. Only processes whose pids
# these daemons wrote in that directory are ever stopped.
#
#   slurm_cluster_start DIR   # returns 77 with the reason on stdout where it cannot start
#   slurm_cluster_stop        # stops every daemon it started; safe to call twice
#   slurm_wait_job ID SECONDS # 0 once job ID completed; 1 saying how it ended otherwise
# After start, SLURM_CONF is exported: sbatch, srun, squeue, scancel talk to this cluster only.
# Run as a command, for other languages' tests (plugins/dask/tests/test_slurm_jobqueue.py):
#   bash slurm_cluster.sh start DIR   # exit 0, or 77 with the reason on stdout
#   bash slurm_cluster.sh stop DIR    # then SLURM_CONF=DIR/slurm.conf
#   bash slurm_cluster.sh wait DIR ID SECONDS

slurm_dir=""

# A TCP port nobody listens on, in 20000-59999.
slurm_free_port() {
  local port
  for _ in $(seq 50); do
    port=$((20000 + RANDOM % 40000))
    ss -Htln "sport = :$port" 2> /dev/null | grep -q . || {
      echo "$port"
      return 0
    }
  done
  return 1
}

# Starts slurmd for node $1 in a mount namespace whose /tmp is a fresh tmpfs. The paths that must
# stay visible there (the cluster's directory and its parent, the repository: a test's files and
# the programs its jobs run) are bound aside first and put back at the same place.
slurm_start_node() {
  local node=$1 keep
  keep="$(dirname "$slurm_dir") $slurm_dir $(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  unshare --mount --propagation private -- bash -c '
    set -e
    mount -t tmpfs -o mode=0755 gf-keep /mnt
    i=0
    for path in $1; do
      case $path in /tmp/*) ;; *) continue ;; esac
      mkdir /mnt/$i
      mount --rbind "$path" /mnt/$i
      i=$((i + 1))
    done
    mount -t tmpfs -o mode=1777 gf-node-tmp /tmp
    i=0
    for path in $1; do
      case $path in /tmp/*) ;; *) continue ;; esac
      mkdir -p "$path"
      mount --move /mnt/$i "$path"
      i=$((i + 1))
    done
    exec slurmd -f "$SLURM_CONF" -N "$2"' slurm-node "$keep" "$node"
}

slurm_cluster_start() {
  slurm_dir=$1
  local d=$slurm_dir tool host ctld_port n1_port n2_port node
  for tool in munged munge slurmctld slurmd sbatch srun squeue scancel sinfo ss mknod unshare; do
    command -v "$tool" > /dev/null || PATH=$PATH:/usr/sbin command -v "$tool" > /dev/null || {
      echo "$tool is missing (scripts/install-deps.sh installs munge, slurmctld, slurmd, slurm-client)"
      return 77
    }
  done
  export PATH=$PATH:/usr/sbin
  mkdir -p "$d/munge" "$d/state" "$d/log" "$d/dev" "$d/spool-n1" "$d/spool-n2"
  chmod 0700 "$d/munge"
  head -c 1024 /dev/urandom > "$d/munge/munge.key"
  chmod 0400 "$d/munge/munge.key"
  for node in 0 1; do
    mknod "$d/dev/gpu$node" c 1 3 2> "$d/log/mknod.err" || {
      echo "cannot make fake GPU device files (mknod): $(cat "$d/log/mknod.err")"
      return 77
    }
  done
  munged --key-file="$d/munge/munge.key" --socket="$d/munge/munge.sock" \
    --pid-file="$d/munge/munged.pid" --log-file="$d/log/munged.log" \
    --seed-file="$d/munge/seed" --force 2> "$d/log/munged.err" || {
    echo "munged cannot start: $(cat "$d/log/munged.err")"
    return 77
  }
  host=$(hostname -s)
  ctld_port=$(slurm_free_port) && n1_port=$(slurm_free_port) && n2_port=$(slurm_free_port) || {
    echo "no free TCP port found"
    return 77
  }
  cat > "$d/slurm.conf" << EOF
ClusterName=gpuflowtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$d/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool-%n
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd-%n.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd-%n.log
# No cgroups and no systemd here (nor in CI): processes are tracked by their parentage.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SchedulerType=sched/backfill
ReturnToService=2
KillWait=2
InactiveLimit=0
MinJobAge=300
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=$n1_port CPUs=2 Gres=gpu:2 RealMemory=1000
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 Port=$n2_port CPUs=2 Gres=gpu:2 RealMemory=1000
PartitionName=gpuflowtest Nodes=n1,n2 Default=YES MaxTime=10 State=UP
EOF
  # Both nodes' fake GPUs are the same two files: they are never opened, only checked to be
  # character devices.
  echo "Name=gpu File=$d/dev/gpu[0-1]" > "$d/gres.conf"
  export SLURM_CONF=$d/slurm.conf
  slurmctld -f "$SLURM_CONF" -i 2> "$d/log/slurmctld.err" || {
    echo "slurmctld cannot start: $(cat "$d/log/slurmctld.err" "$d/log/slurmctld.log" 2> /dev/null | tail -5)"
    return 77
  }
  for node in n1 n2; do
    slurm_start_node "$node" 2> "$d/log/slurmd-$node.err" || {
      echo "slurmd $node cannot start: $(cat "$d/log/slurmd-$node.err" "$d/log/slurmd-$node.log" 2> /dev/null | tail -5)"
      return 77
    }
  done
  # Up once both nodes are idle (registered, their GPUs counted). Each look is bounded: sinfo
  # waits out Slurm's message timeout (10 s) while slurmctld is not answering yet, and 150 such
  # looks would outlast the test's own timeout on a loaded machine.
  local deadline=$((SECONDS + 30 * ${GPUFLOW_TEST_TIME_FACTOR:-1}))
  while ((SECONDS < deadline)); do
    [[ $(timeout 3 sinfo -h -N -t idle -o %N 2> /dev/null | sort -u | wc -l) -eq 2 ]] && return 0
    sleep 0.2
  done
  echo "the nodes did not come up: $(timeout 3 sinfo -N 2>&1 | tail -3); $(tail -3 "$d/log/slurmctld.log")"
  return 77
}

# Waits up to $2 seconds for job $1 to end (polling often: `sbatch --wait` sleeps up to 32 s
# between its looks); 0 when it completed, else 1 saying how it ended.
slurm_wait_job() {
  local state
  for _ in $(seq $(($2 * 10))); do
    state=$(timeout 3 scontrol show job -o "$1" 2> /dev/null | grep -o 'JobState=[A-Z_]*')
    case ${state#JobState=} in
      COMPLETED) return 0 ;;
      PENDING | RUNNING | CONFIGURING | COMPLETING | SUSPENDED | "") sleep 0.1 ;;
      *)
        echo "job $1 ended $state: $(scontrol show job -o "$1" | grep -o 'ExitCode=[0-9:]*')"
        return 1
        ;;
    esac
  done
  echo "job $1 still not done after $2 s ($state)"
  return 1
}

# The pids of processes started under this cluster's daemons (slurmstepd and what it runs, our
# gpuflow services): their environment names this cluster's slurm.conf.
slurm_cluster_processes() {
  local env pid stat parent
  for env in /proc/[0-9]*/environ; do
    pid=${env#/proc/}
    pid=${pid%/environ}
    stat=$(cat "/proc/$pid/stat" 2> /dev/null) || continue
    stat=${stat##*) }  # after the command's name, which may hold anything: state, parent, ...
    parent=${stat#* }
    parent=${parent%% *}
    # Not this shell, nor the commands of this very search.
    [[ $pid == "$$" || $pid == "$BASHPID" || $parent == "$$" || $parent == "$BASHPID" ]] &&
      continue
    { tr '\0' '\n' < "$env"; } 2> /dev/null | grep -qxF "SLURM_CONF=$slurm_dir/slurm.conf" &&
      echo "$pid"
  done
}

# Whether process $1 runs (a zombie does not: nothing may reap the daemons' where PID 1 is not
# an init).
slurm_alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2> /dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat:0:1} != Z ]]
}

# Waits up to $2 seconds (0.1 s steps) for the processes in $1 (a list) to end; 1 if one is left.
slurm_wait_gone() {
  local pid
  for _ in $(seq $(($2 * 10))); do
    for pid in $1; do
      slurm_alive "$pid" && { sleep 0.1; continue 2; }
    done
    return 0
  done
  return 1
}

slurm_cluster_stop() {
  [[ -n "$slurm_dir" ]] || return 0
  local d=$slurm_dir pidfile pid daemons=""
  # Jobs first: slurmstepd outlives its slurmd by design (a restart must not kill jobs).
  scancel --quiet --full -p gpuflowtest 2> /dev/null
  for _ in $(seq 50); do
    timeout 3 squeue -h 2> /dev/null | grep -q . || break
    sleep 0.1
  done
  for pidfile in "$d/slurmd-n1.pid" "$d/slurmd-n2.pid" "$d/slurmctld.pid"; do
    pid=$(cat "$pidfile" 2> /dev/null) && kill -TERM "$pid" 2> /dev/null && daemons+=" $pid"
  done
  slurm_wait_gone "$daemons" 5 || kill -KILL $daemons 2> /dev/null
  # Whatever a job or a step left (the daemons run as root: so does everything they started).
  pid=$(slurm_cluster_processes)
  [[ -n "$pid" ]] && kill -KILL $pid 2> /dev/null
  # munged last: the others talk to it while they stop.
  pid=$(cat "$d/munge/munged.pid" 2> /dev/null) && kill -TERM "$pid" 2> /dev/null &&
    { slurm_wait_gone "$pid" 5 || kill -KILL "$pid" 2> /dev/null; }
  slurm_dir=""
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  case ${1:-} in
    start) slurm_cluster_start "${2:?DIR}" ;;
    wait)
      export SLURM_CONF=${2:?DIR}/slurm.conf
      slurm_wait_job "${3:?ID}" "${4:?SECONDS}"
      ;;
    stop)
      slurm_dir=${2:?DIR}
      export SLURM_CONF=$slurm_dir/slurm.conf
      slurm_cluster_stop
      ;;
    *)
      echo "usage: $0 start|stop DIR, or wait DIR ID SECONDS" >&2
      exit 2
      ;;
  esac
fi
