#!/usr/bin/env bash
# The group socket for real (issue 27, item 4): `gpuflow serve --group G` as root, two users in G
# and one outside it, all made here and removed at the end, whatever happens.
#
#   group_socket_test.sh GPUFLOW_CLI [TIME_FACTOR]
#
# Checks, in this order (the fairness part first, while neither user has any usage):
# 1. the socket is mode 0660 and group G;
# 2. fair share: with one device, one user flooding from 6 connections and the other from 2,
#    every lease is granted (none times out) and the device's first jobs split near evenly
#    between the users (counted in a ledger the jobs write; one device, so one job at a time);
# 3. each user in G leases with `gpuflow lease`, and finds the service with no --pool when it is
#    the node's system socket (GPUFLOW_SYSTEM_SOCKET stands in for /run/gpuflow/gpuflow.sock);
# 4. the user outside G is refused with "Permission denied ... group 'G'", and the service goes
#    on serving the others;
# 5. status as docs/service.md says: names of another user's leases, queued requests and ended
#    leases read "(another user's)", their user names show, root sees every name.
# Exits 77 (skipped, with the reason) when not root or without useradd, groupadd or setpriv.
set -uo pipefail

cli=${1:?usage: $0 GPUFLOW_CLI [TIME_FACTOR]}
factor=${2:-1}
skip() {
  echo "SKIP: $*"
  exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root to create users and a group"
for tool in useradd userdel groupadd groupdel setpriv setsid; do
  command -v "$tool" > /dev/null || skip "$tool is missing"
done

tag=$$
group=gft-grp-$tag
alice=gft-alice-$tag
bob=gft-bob-$tag
carol=gft-carol-$tag
dir=$(mktemp -d "${TMPDIR:-/tmp}/gft-group-XXXXXX") || exit 1
sock=$dir/gpuflow.sock
scratch=$dir/scratch  # the users' flags and ledger
serve_pid=
background=()         # process groups started here (setsid), as their leaders' pids
made_users=()
made_group=

fail() {
  echo "FAIL: $*"
  [ -s "$dir/serve.err" ] && sed 's/^/  serve: /' "$dir/serve.err" | tail -40
  exit 1
}

cleanup() {
  local pid uid
  for pid in "${background[@]}"; do kill -KILL -- "-$pid" 2> /dev/null; done
  if [ -n "$serve_pid" ]; then
    kill -TERM "$serve_pid" 2> /dev/null
    wait "$serve_pid" 2> /dev/null
  fi
  wait 2> /dev/null
  # Anything still running as these users was started by this test (a job a killed lease left).
  for user in "${made_users[@]}"; do
    uid=$(id -u "$user" 2> /dev/null) || continue
    for pid in $(pgrep -U "$uid"); do kill -KILL "$pid" 2> /dev/null; done
  done
  for user in "${made_users[@]}"; do userdel "$user" 2> /dev/null; done
  [ -n "$made_group" ] && groupdel "$group" 2> /dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

chmod 0755 "$dir"  # the users traverse it to the socket
mkdir -m 1777 "$scratch"
groupadd "$group" || skip "groupadd $group failed"
made_group=1
primary=users
getent group users > /dev/null || primary=nogroup
for user in "$alice" "$bob" "$carol"; do
  extra=(-G "$group")
  [ "$user" = "$carol" ] && extra=()
  useradd -M -N -g "$primary" "${extra[@]}" -d /nonexistent -s /bin/sh "$user" ||
    skip "useradd $user failed"
  made_users+=("$user")
done

# as USER COMMAND...: COMMAND as USER with USER's groups, in a plain environment (keeping what
# the sanitized builds need, and the library path of a build run from elsewhere: the GPU kit).
user_argv() {  # sets run_as to the command line that runs as $1
  local name
  run_as=(setpriv --reuid="$1" --regid="$primary" --init-groups -- env -i PATH=/usr/bin:/bin
    HOME="$scratch" USER="$1" LOGNAME="$1")
  for name in LD_LIBRARY_PATH UCX_MODULE_DIR UCX_MEM_EVENTS ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS LSAN_OPTIONS; do
    [ -n "${!name:-}" ] && run_as+=("$name=${!name}")
  done
}
as() {
  user_argv "$1"
  shift
  "${run_as[@]}" "$@"
}
# in_background USER COMMAND...: the same in a session of its own (killed whole at the end);
# sets $last to its pid.
in_background() {
  user_argv "$1"
  shift
  setsid "${run_as[@]}" "$@" &
  last=$!
  background+=("$last")
}

as "$alice" test -x "$cli" || skip "$cli is not executable by other users (a private build tree)"

# wait_for SECONDS COMMAND...: until COMMAND succeeds; false after SECONDS × the time factor.
wait_for() {
  local tries=$(($1 * factor * 20))
  shift
  while ! "$@"; do
    tries=$((tries - 1))
    [ "$tries" -gt 0 ] || return 1
    sleep 0.05
  done
}

"$cli" serve --backend host --emulated-devices 1 --group "$group" --socket "$sock" \
  > "$dir/serve.out" 2> "$dir/serve.err" &
serve_pid=$!
wait_for 20 grep -q "listening on" "$dir/serve.out" || fail "gpuflow serve did not start"

# 1. The socket.
[ "$(stat -c '%a %G' "$sock")" = "660 $group" ] ||
  fail "the socket is $(stat -c '%a %G' "$sock"), not 660 $group"
echo "ok: the socket is 0660, group $group"

# 2. Fair share between the two users: alice floods from 6 connections, bob from 2. Granting in
# arrival order would give alice 3 jobs in 4; by user, each gets about half. Each job writes
# its user to the ledger while it holds the only device, so the ledger is the grants' order.
: > "$scratch/ledger"
chmod 0666 "$scratch/ledger"
# Jobs long enough that bob's next `gpuflow lease` has started before his turn comes again
# (two jobs later), sanitized builds included: else the gaps, not the policy, would decide.
job_s=$(awk "BEGIN { print 0.1 * $factor }")
lease_timeout=$((30 * factor))
flooders=()
flood() {  # flood USER CONNECTIONS JOBS_EACH
  local i
  for ((i = 0; i < $2; i++)); do
    in_background "$1" sh -c '
      while [ ! -e "$1/go" ]; do sleep 0.01; done
      n=0
      while [ "$n" -lt "$2" ]; do
        "$3" lease --pool "unix://$4" --gpus 1 --timeout "$5" --name flood -- \
          sh -c "echo $6 >> $1/ledger; sleep $7" || exit 1
        n=$((n + 1))
      done' flood "$scratch" "$3" "$cli" "$sock" "$lease_timeout" "$1" "$job_s" \
      2> "$dir/flood-$1-$i.err"
    flooders+=("$last")
  done
}
flood "$alice" 6 4
flood "$bob" 2 12
touch "$scratch/go"
for pid in "${flooders[@]}"; do
  wait "$pid" || fail "a flooding lease failed: $(cat "$dir"/flood-*.err)"
done
background=()
count() { grep -c "^$2\$" <<< "$1"; }
all=$(cat "$scratch/ledger")
[ "$(count "$all" "$alice")" = 24 ] && [ "$(count "$all" "$bob")" = 24 ] ||
  fail "not every job ran: $(count "$all" "$alice") of alice's 24, $(count "$all" "$bob") of bob's 24"
first=$(head -n 24 <<< "$all")
a=$(count "$first" "$alice")
b=$(count "$first" "$bob")
echo "fair share: of the first 24 jobs, $a went to alice (6 connections), $b to bob (2)"
((a >= 7 && a <= 17 && b >= 7 && b <= 17)) || fail "the device did not split near evenly: $(tr '\n' ' ' <<< "$first")"
echo "ok: fair share between users holds"

# 3. Each user in the group leases, and finds the group's service with no --pool when it is the
# node's system socket.
for user in "$alice" "$bob"; do
  out=$(as "$user" "$cli" lease --pool "unix://$sock" --gpus 1 --timeout "$lease_timeout" -- \
    sh -c 'echo "$CUDA_VISIBLE_DEVICES"' 2> "$dir/lease.err") ||
    fail "$user could not lease: $(cat "$dir/lease.err")"
  [[ $out == GPU-00000000-gpuf-emul-* ]] || fail "$user's job saw CUDA_VISIBLE_DEVICES=$out"
  out=$(as "$user" env GPUFLOW_SYSTEM_SOCKET="$sock" "$cli" status --json 2> "$dir/status.err") ||
    fail "$user's client did not find the system socket: $(cat "$dir/status.err")"
  [[ $out == *"\"endpoint\":\"unix://$sock\""* ]] || fail "$user reached another service: $out"
done
if [ ! -S /run/gpuflow/gpuflow.sock ]; then
  own="/tmp/gpuflow-$(id -u "$alice")/gpuflow.sock"
  if as "$alice" "$cli" status 2> "$dir/status.err"; then fail "status found a service at $own"; fi
  grep -qF "unix://$own" "$dir/status.err" ||
    fail "with no service anywhere, the error does not name $own: $(cat "$dir/status.err")"
fi
echo "ok: both users of $group lease; clients find the system socket"

# 4. A user outside the group is refused, and the service goes on.
if as "$carol" "$cli" lease --pool "unix://$sock" --gpus 1 -- true 2> "$dir/carol.err"; then
  fail "$carol, outside $group, was given a lease"
fi
grep -qF "cannot connect to the gpuflow service at unix://$sock: Permission denied" \
  "$dir/carol.err" &&
  grep -qF "group '$group'" "$dir/carol.err" ||
  fail "$carol's refusal does not say why: $(cat "$dir/carol.err")"
kill -0 "$serve_pid" 2> /dev/null || fail "the service stopped"
as "$alice" "$cli" lease --pool "unix://$sock" --gpus 1 --timeout "$lease_timeout" -- true \
  2> "$dir/lease.err" || fail "after refusing $carol: $(cat "$dir/lease.err")"
echo "ok: $carol is refused: $(cat "$dir/carol.err")"

# 5. What each user sees of the other's leases: alice holds the device under a name, bob waits
# for it under another.
section() {  # section JSON LIST: one top-level list of a status JSON ("leases", "ended", "queued")
  local rest=${1#*\""$2"\":\[}
  case $2 in
    leases) echo "${rest%%\],\"ended\":\[*}" ;;
    ended) echo "${rest%%\],\"queued\":\[*}" ;;
    queued) echo "${rest%%\],\"clients\":\[*}" ;;
  esac
}
shows() {  # shows JSON LIST USER NAME: whether LIST has an entry of USER named NAME
  grep -qF "\"uid\":$(id -u "$3"),\"user\":\"$3\",\"name\":\"$4\"" <<< "$(section "$1" "$2")"
}
status_of() {  # status_of USER [--json]
  if [ "$1" = root ]; then "$cli" status --pool "unix://$sock" "${@:2}"; else
    as "$1" "$cli" status --pool "unix://$sock" "${@:2}"
  fi
}
hidden="(another user's)"
secret_a="alice-secret-$tag"
secret_b="bob-secret-$tag"
in_background "$alice" "$cli" lease --pool "unix://$sock" --gpus 1 --name "$secret_a" -- \
  sh -c "touch $scratch/alice-holds; while [ ! -e $scratch/release ]; do sleep 0.05; done"
holder=$last
wait_for 20 test -e "$scratch/alice-holds" || fail "alice's lease was not granted"
in_background "$bob" "$cli" lease --pool "unix://$sock" --gpus 1 --timeout "$lease_timeout" \
  --name "$secret_b" -- true
waiter=$last
bob_queued() { shows "$(status_of root --json)" queued "$bob" "$secret_b"; }
wait_for 20 bob_queued || fail "bob's request did not queue: $(status_of root --json)"

as_alice=$(status_of "$alice" --json) || fail "alice's status failed"
as_bob=$(status_of "$bob" --json) || fail "bob's status failed"
as_root=$(status_of root --json) || fail "root's status failed"
shows "$as_alice" leases "$alice" "$secret_a" || fail "alice does not see her lease: $as_alice"
shows "$as_alice" queued "$bob" "$hidden" || fail "alice sees bob's request so: $as_alice"
shows "$as_bob" leases "$alice" "$hidden" || fail "bob sees alice's lease so: $as_bob"
shows "$as_bob" queued "$bob" "$secret_b" || fail "bob does not see his request: $as_bob"
[[ $as_bob != *"$secret_a"* && $as_alice != *"$secret_b"* ]] ||
  fail "a name of another user's lease showed"
shows "$as_root" leases "$alice" "$secret_a" && shows "$as_root" queued "$bob" "$secret_b" ||
  fail "root does not see every name: $as_root"
table=$(status_of "$bob") || fail "bob's status table failed"
[[ $table != *"$secret_a"* && $table == *"$hidden"* ]] || fail "bob's table shows: $table"

touch "$scratch/release"
wait "$holder" || fail "alice's lease command failed"
wait "$waiter" || fail "bob's lease command failed"
background=()
as_alice=$(status_of "$alice" --json) || fail "alice's status failed"
as_bob=$(status_of "$bob" --json) || fail "bob's status failed"
shows "$as_bob" ended "$alice" "$hidden" && shows "$as_bob" ended "$bob" "$secret_b" ||
  fail "bob sees the ended leases so: $as_bob"
shows "$as_alice" ended "$alice" "$secret_a" && shows "$as_alice" ended "$bob" "$hidden" ||
  fail "alice sees the ended leases so: $as_alice"
[[ $as_bob != *"$secret_a"* && $as_alice != *"$secret_b"* ]] ||
  fail "a name of another user's ended lease showed"
echo "ok: another user's leases, requests and ended leases show their user, not their name"
echo PASS
