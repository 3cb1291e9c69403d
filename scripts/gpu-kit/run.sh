#!/usr/bin/env bash
# The GPU kit's one call on a GPU machine (docs/gpu-kit.md). scripts/gpu-kit.sh copies this file
# to .gpu-kit/run.sh; it runs from any directory, at any path, as
#     .gpu-kit/run.sh [--quick] [--steps a,b,...] [--budget SECONDS] [--list]
# and writes $OUT/gpu-report.md (a table: step, result, figure, seconds, then details),
# $OUT/gpu-results.tsv (the same rows) and $OUT/gpu-logs.tar.gz (every raw log). Both are
# rewritten after each step, so a run cut short still brings back what it measured.
#
# Steps, in order: kit gpu ctest seed overhead spill service python scaling (--list explains
# them). Each has its own time limit and runs whatever the others did; the whole run stays
# within --budget seconds (default 450, under the issue's 8 minutes). Without a GPU (no
# `nvidia-smi -L` device, or GPU_KIT_NO_GPU=1) the GPU steps report "skipped: no GPU" and the
# others run. The work directory ($TMPDIR/gpu-kit.XXXXXX: the unpacked build, logs, sockets) is
# removed at the end unless GPU_KIT_KEEP_WORK=1. --quick runs a subset of ctest and small scheduler graphs (the check on machines
# without a GPU, scripts/test-gpu-kit.sh). Exit status: 0 when no step failed, 1 otherwise.
set -euo pipefail
trap 'echo "run.sh: stopped at line $LINENO: $BASH_COMMAND" >&2' ERR

KIT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=${GPU_KIT_ROOT:-$(dirname "$KIT")}  # the repository copy the kit sits in

all_steps=(kit gpu ctest seed overhead spill service python scaling)
gpu_steps=" gpu seed overhead spill service python "
# Seconds each step may take (at most; the sum is the default budget).
declare -A limit=([kit]=15 [gpu]=25 [ctest]=100 [seed]=80 [overhead]=25 [spill]=30
  [service]=55 [python]=90 [scaling]=150)
declare -A about=(
  [kit]="the kit on this machine: glibc, libstdc++, the build paths baked into test binaries, every binary's libraries resolved from the kit"
  [gpu]="the GPU as seen: nvidia-smi, gpu_probe info, gpuflow info and doctor (devices in PCI order, UUIDs, memory, compute capability, MPS, UCX)"
  [ctest]="the ctest suite of the CUDA build: Cuda.* first (must run, not skip), then the rest; tests needing what the machine lacks skipped by name"
  [seed]="seed_array 500000 10000 (2 TB of normals) on the GPU with its sum checked, beside seed_fused 500000; smaller sizes if it fails"
  [overhead]="gpu_overhead (empty GPU tasks, device-to-host through the runtime) beside plain cudaMemcpy (gpu_probe bandwidth)"
  [spill]="gpu_spill: live data 1.5x a 2 GiB device_memory_limit, result checked, bytes spilled"
  [service]="gpuflow serve on the GPU, two gpuflow lease --gpus 0.5 jobs allocating device memory, doctor, MPS and its pinned-memory limit"
  [python]="CuPy chunks through gpuflow.dask (seed, sum checked) and LocalGPUCluster on the GPU; wheels installed from the kit without a registry"
  [scaling]="gpuflow_bench wide/chain/tree at 1, 2, 4, 8, 16 CPU workers (those this machine has): tasks/s of no-op, 1 us and 5 us tasks, Taskflow beside when the kit carries it; the scheduler mutex held per task at 2 and at the most"
)

usage() {
  echo "usage: $0 [--quick] [--steps a,b,...] [--budget SECONDS] [--list]"
  echo "steps: ${all_steps[*]}"
}
quick=0
budget=${GPU_KIT_BUDGET:-450}
steps=("${all_steps[@]}")
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --steps) shift; IFS=, read -r -a steps <<< "${1:-}" ;;
    --budget) shift; budget=${1:-} ;;
    --list)
      for s in "${all_steps[@]}"; do printf '%-9s %3ss  %s\n' "$s" "${limit[$s]}" "${about[$s]}"; done
      exit 0 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
  shift
done
for s in "${steps[@]}"; do
  [ -n "${limit[$s]:-}" ] || { echo "run.sh: unknown step '$s'" >&2; usage >&2; exit 2; }
done
# In the order above, whatever the order asked; the kit step prepares everything else (paths,
# libraries, ctest's files), so it always runs, first.
asked=" kit ${steps[*]} "
steps=()
for s in "${all_steps[@]}"; do [[ $asked == *" $s "* ]] && steps+=("$s"); done
[[ $budget =~ ^[0-9]+$ ]] || { echo "run.sh: --budget takes whole seconds" >&2; exit 2; }
for s in "${all_steps[@]}"; do  # GPU_KIT_LIMIT_<step>=SECONDS overrides a step's limit
  v=GPU_KIT_LIMIT_$s
  if [ -n "${!v:-}" ]; then limit[$s]=${!v}; fi
done
if [ ! -f "$KIT/kit.env" ]; then
  echo "run.sh: no kit.env beside run.sh: build the kit first (scripts/gpu-kit.sh)" >&2
  exit 2
fi
# shellcheck source=/dev/null
. "$KIT/kit.env"  # KIT_SOURCE_DIR KIT_BUILD_DIR KIT_COMMIT KIT_DATE KIT_GLIBC_NEEDED ...

if [ -z "${OUT:-}" ]; then
  OUT=$PWD/gpu-kit-out
  echo "run.sh: OUT is not set; writing to $OUT"
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd -P)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-kit.XXXXXX")
# Some tests run a client as another user (nobody): it must reach the sockets and libraries here.
chmod 755 "$WORK"
LOGS=$WORK/logs
mkdir -p "$LOGS" "$WORK/details"
started=$(date +%s)
deadline=$((started + budget))
nproc=$(nproc)
B=$WORK/build  # the kit's build tree, unpacked from build.tar.gz by the kit step

# ---- Environment: the kit's libraries first, UCX's modules from the kit ----------------------
# The libraries are copied beside the unpacked tree (by the kit step), where every user can read
# them whatever the permissions of the directories above the kit.
L=$WORK/lib
export LD_LIBRARY_PATH="$B/src:$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UCX_MODULE_DIR=$L/ucx
export GPUFLOW_LIBRARY=$B/src/libgpuflow.so.0
export PYTHONDONTWRITEBYTECODE=1
unset GPUFLOW_POOL GPUFLOW_DASHBOARD || true
export TMPDIR=$WORK  # sockets, logs and lock files of every step stay in the work directory

have_gpu=0
gpu_why="no GPU"
if [ -n "${GPU_KIT_NO_GPU:-}" ]; then
  gpu_why="no GPU (GPU_KIT_NO_GPU is set)"
elif command -v nvidia-smi >/dev/null 2>&1; then
  # Read whole before matching: a reader that stops at the first line could end nvidia-smi with
  # SIGPIPE, which pipefail would turn into "no GPU" (here and below, no early-exit readers).
  gpus=$(timeout 20 nvidia-smi -L 2>/dev/null || true)
  if grep -q '^GPU ' <<< "$gpus"; then have_gpu=1; fi
fi
broken=""        # set by the kit step when nothing here can run
gpu_unusable=""  # set by the gpu step when gpuflow finds no usable GPU: the GPU steps are skipped

# ---- Helpers ----------------------------------------------------------------------------------
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# Seconds left for the current step: its own limit, and never past the whole run's deadline.
step_left() {
  local t=$(($(date +%s) - step_t0))
  local left=$((step_limit - t))
  local global=$((deadline - $(date +%s)))
  [ $global -lt $left ] && left=$global
  [ $left -lt 1 ] && left=1
  echo $left
}
# tmo SECONDS CMD...: CMD with at most SECONDS (and never past the step's limit).
tmo() {
  local want=$1; shift
  local left
  left=$(step_left)
  [ "$want" -gt "$left" ] && want=$left
  timeout -k 3 "$want" "$@"
}
# A JSON field of the last JSON line in a file: jget FILE KEY [DEFAULT]
jget() {
  python3 - "$1" "$2" "${3:-}" <<'EOF' 2>/dev/null || echo "${3:-}"
import json, sys
path, key, default = sys.argv[1:4]
value = default
try:
    for line in open(path, errors="replace"):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if key in d:
                value = d[key]
except OSError:
    pass
if isinstance(value, float):
    value = f"{value:.4g}"
print(value)
EOF
}
detail() { printf '%s\n' "$@" >> "$WORK/details/$step.md"; }
# Up to N lines of a log into the details, fenced.
detail_log() {  # detail_log FILE [LINES]
  local n=${2:-20}
  [ -s "$1" ] || return 0
  detail '```' "$(tail -n "$n" "$1" | cut -c1-300)" '```'
}

rows=$WORK/rows.tsv
: > "$rows"
write_report() {
  local tmp=$OUT/.gpu-report.md.tmp
  {
    echo "# gpuflow GPU kit report"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC') (started $(date -u -d "@$started" '+%H:%M:%S'), $(( $(date +%s) - started )) s so far, budget ${budget} s)"
    echo "- host: $(hostname 2>/dev/null || echo '?'), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) memory, $( (grep -m1 '^PRETTY_NAME=' /etc/os-release 2>/dev/null || uname -sr) | sed 's/^PRETTY_NAME=//; s/"//g'), $(getconf GNU_LIBC_VERSION 2>/dev/null || echo 'glibc ?')"
    echo "- GPU: ${gpu_line:-none seen}"
    echo "- kit: commit ${KIT_COMMIT}, built ${KIT_DATE} (${KIT_NVCC}, CUDA archs ${KIT_CUDA_ARCHS})"
    echo "- command: $0 ${run_args}"
    echo
    echo "| step | result | figure | seconds |"
    echo "| --- | --- | --- | --- |"
    while IFS=$'\t' read -r s r f t; do
      printf '| %s | %s | %s | %s |\n' "$s" "$r" "${f//|/\\|}" "$t"
    done < "$rows"
    echo
    echo "## Details"
    for s in "${steps[@]}"; do
      if [ -s "$WORK/details/$s.md" ]; then
        echo
        echo "### $s"
        echo
        cat "$WORK/details/$s.md"
      fi
    done
    echo
    echo "Raw logs: gpu-logs.tar.gz (one file per command)."
  } > "$tmp"
  mv -f "$tmp" "$OUT/gpu-report.md"
  cp -f "$rows" "$OUT/gpu-results.tsv"
  tar -czf "$OUT/.gpu-logs.tar.gz.tmp" -C "$WORK" logs 2>/dev/null &&
    mv -f "$OUT/.gpu-logs.tar.gz.tmp" "$OUT/gpu-logs.tar.gz"
}
run_args="$*"
[ $quick = 1 ] && run_args="--quick $run_args"

failed=0
result="" figure=""
run_step() {  # run_step NAME
  step=$1
  step_t0=$(date +%s)
  step_limit=${limit[$step]}
  local t0
  t0=$(now)
  result="" figure=""
  echo "=== $step: ${about[$step]}"
  if [ -n "$broken" ] && [ "$step" != kit ]; then
    result="skipped: $broken"
  elif [ $((deadline - $(date +%s))) -lt 5 ]; then
    result="skipped: out of time (budget ${budget} s)"
  elif [[ $gpu_steps == *" $step "* ]] && [ $have_gpu = 0 ]; then
    result="skipped: $gpu_why"
    if [ "$step" = gpu ]; then step_gpu_without_one || true; fi
  elif [[ $gpu_steps == *" $step "* ]] && [ -n "$gpu_unusable" ]; then
    result="skipped: $gpu_unusable"
  else
    local rc=0
    "step_$step" || rc=$?
    [ -n "$result" ] || result="FAIL (exit $rc)"
  fi
  # MISS: the step ran and its results were checked, but a performance target was missed.
  case $result in PASS*|MISS*|skipped*) ;; *) failed=1 ;; esac
  local secs
  secs=$(elapsed "$t0")
  printf '%s\t%s\t%s\t%s\n' "$step" "$result" "${figure:--}" "$secs" >> "$rows"
  echo "--- $step: $result${figure:+ — $figure} (${secs} s)"
  write_report
}

# ---- kit: this machine can run the kit ----------------------------------------------------------
step_kit() {
  local notes=() glibc
  if ! tar -xzf "$KIT/build.tar.gz" -C "$WORK" 2> "$LOGS/kit-unpack.log" || [ ! -d "$B/src" ] ||
     ! cp -a "$KIT/lib" "$L" 2>> "$LOGS/kit-unpack.log"; then
    broken="the kit's build.tar.gz could not be unpacked"
    result="FAIL: $broken"
    detail_log "$LOGS/kit-unpack.log" 5
    return 1
  fi
  glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  detail "- glibc here: ${glibc:-unknown}; the kit's binaries need GLIBC_${KIT_GLIBC_NEEDED}, GLIBCXX_${KIT_GLIBCXX_NEEDED}, CXXABI_${KIT_CXXABI_NEEDED}"
  if [ -n "$glibc" ] && [ "$(printf '%s\n%s\n' "$KIT_GLIBC_NEEDED" "$glibc" | sort -V | sed -n 1p)" != "$KIT_GLIBC_NEEDED" ]; then
    broken="glibc $glibc here, the kit needs $KIT_GLIBC_NEEDED (build the kit on an older system)"
    result="FAIL: $broken"
    return 1
  fi
  # libstdc++: the system's when it is new enough, else the kit's copy (lib/cxx).
  local cxx
  cxx=$( (ldconfig -p 2>/dev/null || true) | awk '/libstdc\+\+\.so\.6 .*x86-64/ && !found {print $NF; found = 1}')
  if [ -n "$cxx" ] && grep -aq "GLIBCXX_${KIT_GLIBCXX_NEEDED}" "$cxx" && grep -aq "CXXABI_${KIT_CXXABI_NEEDED}" "$cxx"; then
    notes+=("libstdc++ of the system")
  else
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$L/cxx"
    notes+=("libstdc++ from the kit (the system's ${cxx:-none found} lacks GLIBCXX_${KIT_GLIBCXX_NEEDED})")
  fi
  # Test binaries name other binaries and source files by the paths they were built at
  # (KIT_BUILD_DIR, KIT_SOURCE_DIR): make those paths lead to this kit and this checkout.
  local src_ok=0
  if [ "$(readlink -f "$KIT_SOURCE_DIR" 2>/dev/null)" = "$(readlink -f "$ROOT")" ]; then
    src_ok=1
  elif [ ! -e "$KIT_SOURCE_DIR" ] && [ ! -L "$KIT_SOURCE_DIR" ]; then
    if mkdir -p "$(dirname "$KIT_SOURCE_DIR")" 2>/dev/null && ln -s "$ROOT" "$KIT_SOURCE_DIR" 2>/dev/null; then
      src_ok=1
      notes+=("linked $KIT_SOURCE_DIR -> $ROOT")
    fi
  fi
  [ $src_ok = 1 ] || notes+=("WARNING: $KIT_SOURCE_DIR is not this checkout and could not be made one: tests naming source files may fail")
  # The build path: a link to this run's unpacked tree (a link of an earlier run is replaced;
  # a real directory is left alone).
  if [ -L "$KIT_BUILD_DIR" ] || [ ! -e "$KIT_BUILD_DIR" ]; then
    if mkdir -p "$(dirname "$KIT_BUILD_DIR")" 2>/dev/null && ln -sfn "$B" "$KIT_BUILD_DIR" 2>/dev/null; then
      notes+=("linked $KIT_BUILD_DIR -> $B")
    else
      notes+=("WARNING: could not link $KIT_BUILD_DIR to the kit: tests that start gpuflow will fail")
    fi
  else
    notes+=("note: $KIT_BUILD_DIR is a real build tree here: binaries named by path come from it")
  fi
  # ctest's files with the kit's real paths (the kit keeps them with placeholders), and this
  # machine's ctest for the tests that run it.
  local f ctest_here
  ctest_here=$(command -v ctest || echo ctest)
  while IFS= read -r f; do
    sed -i -e "s|@GPU_KIT_BUILD@|$B|g" -e "s|@GPU_KIT_SOURCE@|$ROOT|g" \
      -e "s|@GPU_KIT_CTEST@|$ctest_here|g" "$B/$f"
  done < "$KIT/ctest-files.txt"
  # Every binary's libraries, from the kit (or the system's glibc and libstdc++).
  local missing=() elf path count=0
  while IFS= read -r elf; do
    count=$((count + 1))
    case $elf in build/*) path=$B/${elf#build/} ;; lib/*) path=$L/${elf#lib/} ;; *) path=$KIT/$elf ;; esac
    local deps
    deps=$(ldd "$path" 2>&1 || true)
    if grep -q 'not found' <<< "$deps"; then
      missing+=("$elf: $(awk '/not found/ {print $1}' <<< "$deps" | tr '\n' ' ')")
    fi
  done < "$KIT/elf-files.txt"
  local n
  for n in "${notes[@]}"; do detail "- $n"; done
  detail "- $count ELF files checked with ldd; ctest files rewritten for $B"
  if [ ${#missing[@]} -gt 0 ]; then
    printf -- '- unresolved: %s\n' "${missing[@]}" >> "$WORK/details/kit.md"
    result="FAIL"
    figure="${#missing[@]} of $count binaries miss libraries"
    return 1
  fi
  result="PASS"
  figure="glibc ${glibc:-?} (needs ${KIT_GLIBC_NEEDED}); $count binaries resolve; ${notes[0]}"
}

# ---- gpu: what the machine shows ------------------------------------------------------------------
gpuflow_info() {  # info (auto backend) and doctor without a service: devices, CUDA, MPS, UCX
  tmo 15 "$B/tools/gpuflow/gpuflow" info > "$LOGS/gpu-gpuflow-info.log" 2>&1 || true
  tmo 15 "$B/tools/gpuflow/gpuflow" doctor --seconds 1 > "$LOGS/gpu-gpuflow-doctor.log" 2>&1 || true
  detail "gpuflow info:"
  detail_log "$LOGS/gpu-gpuflow-info.log" 25
  detail "gpuflow doctor (no service running yet; the service step runs it against one):"
  detail_log "$LOGS/gpu-gpuflow-doctor.log" 12
}
step_gpu_without_one() {
  gpuflow_info
  figure="gpuflow info: $(grep -m1 -o 'devices: [0-9]*' "$LOGS/gpu-gpuflow-info.log" || echo '?') ($(grep -q emulated "$LOGS/gpu-gpuflow-info.log" && echo emulated || echo real))"
}
step_gpu() {
  tmo 20 nvidia-smi -q > "$LOGS/gpu-nvidia-smi-q.log" 2>&1 || true
  tmo 10 nvidia-smi > "$LOGS/gpu-nvidia-smi.log" 2>&1 || true
  tmo 10 nvidia-smi topo -m > "$LOGS/gpu-nvidia-smi-topo.log" 2>&1 || true
  # name, memory and compute capability come 2nd, 5th and 6th (older drivers lack compute_cap
  # and mig.mode.current: then without them).
  tmo 10 nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,memory.total,compute_cap,driver_version,compute_mode,mig.mode.current,persistence_mode \
    --format=csv > "$LOGS/gpu-query.csv" 2>&1 ||
    tmo 10 nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,memory.total,driver_version,compute_mode,persistence_mode \
      --format=csv > "$LOGS/gpu-query.csv" 2>&1 || true
  detail "nvidia-smi --query-gpu:" '```' "$(cat "$LOGS/gpu-query.csv")" '```'
  detail "nvidia-smi -q (summary):" '```' \
    "$(grep -E '^(Driver Version|CUDA Version)|Product Name|Product Architecture|GPU UUID|Bus Id|MIG Mode|Compute Mode|Persistence Mode|^ +Total +:|Max Clocks|Power Limit' "$LOGS/gpu-nvidia-smi-q.log" | sed -n 1,30p)" '```'
  local driver cuda
  driver=$(awk -F': *' '/^Driver Version/ {print $2; exit}' "$LOGS/gpu-nvidia-smi-q.log")
  cuda=$(awk -F': *' '/^CUDA Version/ {print $2; exit}' "$LOGS/gpu-nvidia-smi-q.log")
  gpu_line="$(sed -n 2p "$LOGS/gpu-query.csv" | cut -d, -f2,5,6 | sed 's/^ *//'); driver ${driver:-?}, CUDA ${cuda:-?}; $(($(wc -l < "$LOGS/gpu-query.csv") - 1)) device(s)"
  tmo 15 "$B/bench/gpu_probe" info > "$LOGS/gpu-probe-info.log" 2>&1 || true
  detail "gpu_probe info:" '```' "$(tail -n 3 "$LOGS/gpu-probe-info.log")" '```'
  gpuflow_info
  if grep -q 'emulated by the host backend' "$LOGS/gpu-gpuflow-info.log"; then
    gpu_unusable="gpuflow sees no usable GPU (the gpu step says why)"
    result="FAIL: gpuflow sees no usable GPU"
    figure=$(grep -m1 'emulated by the host backend' "$LOGS/gpu-gpuflow-info.log" | sed 's/^ *//' | cut -c1-200)
    return 1
  fi
  result="PASS"
  figure="$gpu_line; gpuflow: $(grep -m1 -o 'devices: [0-9]*' "$LOGS/gpu-gpuflow-info.log" || echo 'devices: ?') CUDA"
}

# ---- ctest ----------------------------------------------------------------------------------------
# Tests that need what a GPU machine lacks, skipped by name (each with why):
#   install.consume   installs the build tree and compiles a consumer: needs the build tree's
#                     install rules and objects, which the kit does not carry
ctest_exclude=${GPU_KIT_CTEST_EXCLUDE:-'^install\.consume$'}
# --quick: a representative subset for machines without a GPU (scripts/test-gpu-kit.sh).
ctest_quick='^(Cuda\.|layers\.|readme\.|example\.|bench\.smoke\.(wide|gpu_spill|lease|service_graph|ucx_bandwidth)$|Devices\.|Spill\.|cli\.|ServiceTest\.|DataPlaneCheck\.|SplitRunTest\.|GraphInServiceSeed\.)'
ctest_parse() {  # ctest_parse LOG -> lines "name status"
  sed -nE 's/^ *[0-9]+\/[0-9]+ +Test +#[0-9]+: ([^ ]+) \.+ *(\*\*\*)?([A-Za-z]+).*/\1 \3/p' "$1"
}
step_ctest() {
  command -v ctest >/dev/null || { result="FAIL: no ctest on this machine"; return 1; }
  local cuda_log=$LOGS/ctest-cuda.log rest_log=$LOGS/ctest-rest.log
  # Cuda.* first, one at a time (they share the device).
  tmo 60 ctest --test-dir "$B" -R '^Cuda\.' --output-on-failure > "$cuda_log" 2>&1 || true
  local c_pass c_skip c_fail c_all
  c_all=$(ctest_parse "$cuda_log" | wc -l)
  c_pass=$(ctest_parse "$cuda_log" | awk '$2 == "Passed"' | wc -l)
  c_skip=$(ctest_parse "$cuda_log" | awk '$2 == "Skipped"' | wc -l)
  c_fail=$((c_all - c_pass - c_skip))
  local filter=()
  [ $quick = 1 ] && filter=(-R "$ctest_quick")
  # GPU_KIT_CTEST_REGEX narrows the rest to what it matches (a second run of what failed).
  [ -n "${GPU_KIT_CTEST_REGEX:-}" ] && filter=(-R "$GPU_KIT_CTEST_REGEX")
  # The rest emulate devices and hand lists down themselves: ctest starts them without the
  # machine's own list (a GPU container's NVIDIA_VISIBLE_DEVICES=0), cmake/test_environment.cmake.
  tmo 86400 ctest --test-dir "$B" "${filter[@]}" -E "^Cuda\.|$ctest_exclude" \
    -j "$nproc" --output-on-failure > "$rest_log" 2>&1 || true
  local r_all r_pass r_skip r_fail
  r_all=$(ctest_parse "$rest_log" | wc -l)
  r_pass=$(ctest_parse "$rest_log" | awk '$2 == "Passed"' | wc -l)
  r_skip=$(ctest_parse "$rest_log" | awk '$2 == "Skipped"' | wc -l)
  r_fail=$((r_all - r_pass - r_skip))
  local listed
  listed=$(ctest --test-dir "$B" -N "${filter[@]}" -E "^Cuda\.|$ctest_exclude" 2>/dev/null | awk '/^Total Tests:/ {print $3}')
  detail "- Cuda.*: $c_pass passed, $c_skip skipped, $c_fail failed of $c_all"
  detail "- the rest$([ $quick = 1 ] && echo ' (--quick subset)'): $r_pass passed, $r_skip skipped, $r_fail failed of $r_all run (${listed:-?} listed); skipped by name: $ctest_exclude"
  if [ "$c_fail" -gt 0 ] || { [ $have_gpu = 1 ] && [ "$c_skip" -gt 0 ]; }; then
    detail "- Cuda.* not passed:" "$(ctest_parse "$cuda_log" | awk '$2 != "Passed" {print "  - " $1 ": " $2}')"
  fi
  if [ $r_fail -gt 0 ]; then
    detail "- failed:" "$(ctest_parse "$rest_log" | awk '$2 != "Passed" && $2 != "Skipped" {print "  - " $1 ": " $2}' | sed -n 1,40p)"
  fi
  if [ "$r_skip" -gt 0 ]; then
    detail "- skipped (the test's own reason is in the log):" "$(ctest_parse "$rest_log" | awk '$2 == "Skipped" {print "  - " $1}' | sed -n 1,20p)"
  fi
  local incomplete=""
  [ -n "$listed" ] && [ "$r_all" -lt "$listed" ] && incomplete=" ($((listed - r_all)) did not run: time limit?)"
  figure="Cuda.* $c_pass/$c_all passed, $c_skip skipped; others $r_pass/$r_all passed, $r_fail failed, $r_skip skipped$incomplete"
  if [ "$c_all" = 0 ]; then
    result="FAIL: no Cuda.* test ran"
  elif [ $have_gpu = 1 ] && [ "$c_pass" -ne "$c_all" ]; then
    result="FAIL: Cuda.* did not all pass"
  elif [ $have_gpu = 0 ] && [ $c_fail -gt 0 ]; then
    result="FAIL: Cuda.* failed without a GPU (they should skip)"
  elif [ $r_fail -gt 0 ] || [ "$r_all" = 0 ] || [ -n "$incomplete" ]; then
    result="FAIL"
  elif [ $have_gpu = 0 ]; then
    result="PASS (Cuda.* skipped: $gpu_why)"
  else
    result="PASS"
  fi
}

# ---- seed: the blog's 2 TB on the GPU, beside the fused kernel ------------------------------------
step_seed() {
  local fused=$LOGS/seed-fused.log
  tmo 25 "$B/bench/seed_fused" 500000 > "$fused" 2>&1 || true
  local fused_s
  fused_s=$(jget "$fused" best_s)
  detail "seed_fused 500000:" '```' "$(tail -n 2 "$fused")" '```'
  local size log rc=1 n c
  for size in "500000 10000" "100000 5000" "20000 2000"; do
    read -r n c <<< "$size"
    log=$LOGS/seed-array-$n.log
    rc=0
    GPUFLOW_CPU_WORKERS=-1 tmo 45 "$B/examples/seed_array" "$n" "$c" 3 > "$log" 2>&1 || rc=$?
    detail "GPUFLOW_CPU_WORKERS=-1 seed_array $n $c 3 (exit $rc):"
    detail_log "$log" 10
    [ $rc = 0 ] && break
  done
  if [ $rc != 0 ]; then
    result="FAIL: seed_array failed at every size (exit $rc)"
    figure="fused ${fused_s:-?} s"
    return 1
  fi
  local med tb
  med=$(jget "$log" median_s)
  tb=$(awk -v n="$n" 'BEGIN { printf "%.2g", n * n * 8 / 1e12 }')
  if [ "$n" != 500000 ]; then
    result="FAIL: only N = $n ran"
    figure="seed_array $n $c: ${med} s (median of 3)"
    return 1
  fi
  local ratio="?"
  [ -n "$fused_s" ] && ratio=$(awk -v a="$med" -v b="$fused_s" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }')
  figure="${tb} TB: ${med} s median of 3, sum checked; fused kernel ${fused_s:-?} s (${ratio}x); targets < 5 s, <= 1.5x"
  if awk -v a="$med" -v r="$ratio" 'BEGIN { exit !(a < 5 && r != "?" && r <= 1.5) }'; then
    result="PASS"
  else
    result="MISS (ran and checked; a target missed)"
  fi
}

# ---- overhead: empty GPU tasks and copies through the runtime, against plain CUDA ---------------------
step_overhead() {
  local log=$LOGS/overhead-gpu_overhead.log bw=$LOGS/overhead-bandwidth.log rc=0
  tmo 15 "$B/bench/gpu_overhead" 10000 1024 > "$log" 2>&1 || rc=$?
  tmo 10 "$B/bench/gpu_probe" bandwidth 1024 > "$bw" 2>&1 || true
  detail "gpu_overhead 10000 1024 (exit $rc):" '```' "$(tail -n 3 "$log")" '```'
  detail "gpu_probe bandwidth 1024 (plain cudaMemcpy):" '```' "$(tail -n 3 "$bw")" '```'
  if [ $rc != 0 ]; then result="FAIL (gpu_overhead exit $rc)"; return 1; fi
  figure="empty task $(jget "$log" runtime_us_per_task) us (plain launch $(jget "$log" plain_us_per_launch) us); D2H 1 GiB: runtime $(jget "$log" runtime_d2h_gb_s) GB/s, cudaMemcpy pageable $(jget "$log" cudamemcpy_d2h_gb_s) GB/s (fresh memory $(jget "$log" cudamemcpy_fresh_d2h_gb_s)); pinned H2D $(jget "$bw" h2d_pinned_gb_s), D2H $(jget "$bw" d2h_pinned_gb_s) GB/s"
  result="PASS"
}

# ---- spill: live data 1.5x the device memory limit ----------------------------------------------------
step_spill() {
  local log=$LOGS/spill.log rc=0
  tmo 25 "$B/bench/gpu_spill" --limit-mib 2048 > "$log" 2>&1 || rc=$?
  detail "gpu_spill --limit-mib 2048 (exit $rc):" '```' "$(tail -n 4 "$log")" '```'
  local gib='function g(x) { return sprintf("%.2f GiB", x / 1073741824) }'
  figure=$(awk "$gib"' BEGIN { printf "live %s over a %s limit: spilled %s, brought back %s", g(ARGV[1]), g(ARGV[2]), g(ARGV[3]), g(ARGV[4]) }' \
    "$(jget "$log" live_bytes 0)" "$(jget "$log" limit_bytes 0)" "$(jget "$log" spilled_total 0)" "$(jget "$log" unspilled_total 0)")
  figure="$figure; $(jget "$log" seconds '?') s; sum $([ "$(jget "$log" sum_ok)" = True ] && echo checked || echo 'not checked')"
  figure="$figure; $(jget "$log" spills_dropped '?') device copies dropped, $(jget "$log" copies_to_device '?') copies onto the device"
  if [ $rc = 0 ]; then result="PASS"; else result="FAIL (exit $rc)"; return 1; fi
}

# ---- service: the node's pool on a real GPU, fractional leases, MPS ----------------------------------
svc_pid=""
svc_start() {  # svc_start TAG: gpuflow serve on the GPU in the background; sets sock
  local tag=$1
  sock=$WORK/svc-$tag/gpuflow.sock
  mkdir -p "$WORK/svc-$tag"
  "$B/tools/gpuflow/gpuflow" serve --backend cuda --socket "$sock" > "$LOGS/service-serve-$tag.log" 2>&1 &
  svc_pid=$!
  for _ in $(seq 100); do
    [ -S "$sock" ] && return 0
    kill -0 "$svc_pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
svc_stop() {
  [ -n "$svc_pid" ] || return 0
  kill -TERM "$svc_pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$svc_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$svc_pid" 2>/dev/null || true
  wait "$svc_pid" 2>/dev/null || true
  svc_pid=""
}
mps_started=0
mps_stop() {
  [ $mps_started = 1 ] || return 0
  echo quit | timeout 10 nvidia-cuda-mps-control > /dev/null 2>&1 || true
  mps_started=0
}
step_service() {
  local lease=("$B/tools/gpuflow/gpuflow" lease)
  if ! svc_start plain; then
    result="FAIL: gpuflow serve --backend cuda did not start"
    detail_log "$LOGS/service-serve-plain.log" 15
    svc_stop
    return 1
  fi
  local pool="unix://$sock"
  tmo 10 "$B/tools/gpuflow/gpuflow" status --pool "$pool" > "$LOGS/service-status.log" 2>&1 || true
  tmo 15 "$B/tools/gpuflow/gpuflow" doctor --pool "$pool" --seconds 1 > "$LOGS/service-doctor.log" 2>&1 || true
  detail "gpuflow status:"
  detail_log "$LOGS/service-status.log" 12
  detail "gpuflow doctor --pool (service on the GPU):"
  detail_log "$LOGS/service-doctor.log" 12
  # Two half-GPU jobs at once, each holding 2 GiB of device memory for 3 s.
  local t0 a=$LOGS/service-lease-a.log b=$LOGS/service-lease-b.log ra=0 rb=0
  t0=$(now)
  tmo 30 "${lease[@]}" --pool "$pool" --gpus 0.5 --name kit-a -- "$B/bench/gpu_probe" alloc 2048 3 > "$a" 2>&1 &
  local pa=$!
  tmo 30 "${lease[@]}" --pool "$pool" --gpus 0.5 --name kit-b -- "$B/bench/gpu_probe" alloc 2048 3 > "$b" 2>&1 &
  local pb=$!
  wait $pa || ra=$?
  wait $pb || rb=$?
  local both
  both=$(elapsed "$t0")
  detail "two \`gpuflow lease --gpus 0.5 -- gpu_probe alloc 2048 3\` at once (exits $ra, $rb; ${both} s for both):" \
    '```' "$(tail -n 2 "$a")" "$(tail -n 2 "$b")" '```'
  local cva cvb
  cva=$(jget "$a" cuda_visible_devices '?')
  cvb=$(jget "$b" cuda_visible_devices '?')
  figure="0.5 + 0.5 leases: CUDA_VISIBLE_DEVICES=${cva} and ${cvb}, 2 GiB each, ${both} s for two 3 s jobs ($(awk -v t="$both" 'BEGIN { print (t < 5.5 ? "together" : "one after the other") }'))"
  svc_stop
  local ok=1
  [ $ra = 0 ] && [ $rb = 0 ] || ok=0
  # MPS: can it start here, and is a 0.5 lease's pinned-memory limit enforced?
  local mps="MPS: no nvidia-cuda-mps-control"
  if command -v nvidia-cuda-mps-control > /dev/null; then
    export CUDA_MPS_PIPE_DIRECTORY=$WORK/mps/pipe CUDA_MPS_LOG_DIRECTORY=$WORK/mps/log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if tmo 10 nvidia-cuda-mps-control -d > "$LOGS/service-mps-start.log" 2>&1 && sleep 1 &&
       [ -e "$CUDA_MPS_PIPE_DIRECTORY/control" ]; then
      mps_started=1
      if svc_start mps; then
        pool="unix://$sock"
        tmo 15 "$B/tools/gpuflow/gpuflow" doctor --pool "$pool" --seconds 1 > "$LOGS/service-mps-doctor.log" 2>&1 || true
        local small=$LOGS/service-mps-small.log big=$LOGS/service-mps-big.log rs=0 rbig=0
        tmo 30 "${lease[@]}" --pool "$pool" --gpus 0.5 --name kit-mps-small -- "$B/bench/gpu_probe" alloc-frac 0.25 > "$small" 2>&1 || rs=$?
        tmo 30 "${lease[@]}" --pool "$pool" --gpus 0.5 --name kit-mps-big -- "$B/bench/gpu_probe" alloc-frac 0.75 > "$big" 2>&1 || rbig=$?
        detail "MPS running ($CUDA_MPS_PIPE_DIRECTORY); a 0.5 lease allocating 0.25 of the card (exit $rs), then 0.75 of it (exit $rbig):" \
          '```' "$(grep -m1 'NVIDIA MPS' "$LOGS/service-mps-doctor.log")" "$(tail -n 2 "$small")" "$(tail -n 2 "$big")" '```'
        if [ $rs = 0 ] && [ $rbig = 3 ]; then
          mps="MPS: started; a 0.5 lease's pinned-memory limit enforced (0.25 of the card granted, 0.75 refused)"
        elif [ $rs = 0 ] && [ $rbig = 0 ]; then
          mps="MPS: started; a 0.5 lease's pinned-memory limit NOT enforced (0.75 of the card granted)"
        else
          mps="MPS: started; leases under it failed (exits $rs, $rbig)"
        fi
        svc_stop
      else
        mps="MPS: started, but gpuflow serve did not start under it"
      fi
      mps_stop
    else
      mps="MPS: could not be started ($(tail -n 1 "$LOGS/service-mps-start.log" | cut -c1-120))"
      detail "nvidia-cuda-mps-control -d:"
      detail_log "$LOGS/service-mps-start.log" 5
      cp -r "$CUDA_MPS_LOG_DIRECTORY" "$LOGS/service-mps-log" 2>/dev/null || true
    fi
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  fi
  figure="$figure; $mps"
  if [ $ok = 1 ]; then result="PASS"; else result="FAIL (lease exits $ra, $rb)"; return 1; fi
}

# ---- python: CuPy through gpuflow.dask, LocalGPUCluster ---------------------------------------------
step_python() {
  local py
  py=$(command -v python3 || true)
  [ -n "$py" ] || { result="FAIL: no python3"; return 1; }
  local ver
  ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  # The wheels the image lacks (the kit's are for cp312), into a directory of their own: what the
  # image has (numpy, cupy, ...) is used as it is.
  local target=$WORK/python-deps
  mkdir -p "$target"
  local missing
  missing=$("$py" - "$KIT/wheels/requirements.txt" <<'EOF' 2>"$LOGS/python-missing.log"
import sys
from importlib import metadata
for line in open(sys.argv[1]):
    name = line.split("==")[0].strip()
    if not name or name.startswith("#"):
        continue
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        print(name)
EOF
  ) || true
  local wheels=() name
  for name in $missing; do
    local norm
    norm=$(echo "$name" | tr 'A-Z-.' 'a-z__')
    local w
    w=$(find "$KIT/wheels" -maxdepth 1 -iname "${norm}-*.whl" -print -quit)
    [ -n "$w" ] && wheels+=("$w")
  done
  detail "- python $ver ($py); installed from the kit's wheels (the image lacks them): $(echo "$missing" | tr '\n' ' ')"
  [ "$ver" = 3.12 ] || detail "- WARNING: the kit's compiled wheels are for CPython 3.12; this is $ver"
  if [ ${#wheels[@]} -gt 0 ]; then
    local prc=0
    if "$py" -m pip --version > /dev/null 2>&1; then
      tmo 40 "$py" -m pip install --no-index --no-deps --disable-pip-version-check -q \
        --target "$target" "${wheels[@]}" > "$LOGS/python-pip.log" 2>&1 || prc=$?
      if [ $prc != 0 ]; then  # at least the pure-Python ones
        local pure=()
        for w in "${wheels[@]}"; do [[ $w == *-none-any.whl ]] && pure+=("$w"); done
        [ ${#pure[@]} -eq 0 ] || tmo 40 "$py" -m pip install --no-index --no-deps \
          --disable-pip-version-check -q --target "$target" "${pure[@]}" >> "$LOGS/python-pip.log" 2>&1 || true
      fi
    else  # no pip: a wheel is a zip of the files a site directory holds
      "$py" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
        "$target" "${wheels[@]}" > "$LOGS/python-pip.log" 2>&1 || prc=$?
    fi
    if [ $prc != 0 ]; then
      detail "- installing the wheels failed (exit $prc):"
      detail_log "$LOGS/python-pip.log" 6
    fi
  fi
  export PYTHONPATH="$KIT/python:$target${PYTHONPATH:+:$PYTHONPATH}"
  local dl=$LOGS/python-dask.log cl=$LOGS/python-cluster.log rd=0 rc=0
  tmo 40 "$py" "$KIT/python/gpu_kit_checks.py" dask 20000 2000 > "$dl" 2>&1 || rd=$?
  tmo 60 "$py" "$KIT/python/gpu_kit_checks.py" cluster 20000 2000 > "$cl" 2>&1 || rc=$?
  detail "gpu_kit_checks.py dask 20000 2000 (exit $rd):"
  detail_log "$dl" 12
  detail "gpu_kit_checks.py cluster 20000 2000 (exit $rc):"
  detail_log "$cl" 12
  figure="gpuflow.dask + CuPy: $(jget "$dl" chunk_type '?') chunks, $(jget "$dl" seconds '?') s (first $(jget "$dl" first_seconds '?') s), sum $([ "$(jget "$dl" sum_ok)" = True ] && echo checked || echo 'NOT checked'); LocalGPUCluster: $(jget "$cl" workers '?') worker(s) on $(jget "$cl" cuda_visible_devices '?'), $(jget "$cl" seconds '?') s, sum $([ "$(jget "$cl" sum_ok)" = True ] && echo checked || echo 'NOT checked')"
  if [ $rd = 0 ] && [ $rc = 0 ]; then result="PASS"; else result="FAIL (exits $rd, $rc)"; return 1; fi
}

# Why the counts scale as they do (issue 29): how long the scheduler's one mutex is held and
# waited for per task at `workers` CPU workers (bench/lock_profile.c, preloaded). No number of
# workers runs more than 1 / (time held per task) tasks/s: the table's last column.
lock_profile_at() {  # lock_profile_at WORKERS SIZES_ARRAY_NAME
  local workers=$1 lp=$B/bench/liblock_profile.so g log rc
  local -n sizes=$2
  if [ ! -e "$lp" ]; then detail "" "No lock profile: $lp was not built (x86-64 only)."; return 0; fi
  detail "" "The scheduler's mutex at $workers workers (LD_PRELOAD=bench/liblock_profile.so):" "" \
    "| graph | tasks/s | held per task | waited per task | acquired per task | ceiling: 1 / held |" \
    "| --- | --- | --- | --- | --- | --- |"
  for g in wide chain tree; do
    log=$LOGS/lock-profile-$workers-$g.log
    rc=0
    tmo 60 env LD_PRELOAD="$lp" GPUFLOW_CPU_WORKERS="$workers" \
      "$B/bench/gpuflow_bench" "$g" "${sizes[$g]}" 3 > "$log" 2>&1 || rc=$?
    detail "$(python3 - "$log" "$g" "$rc" <<'EOF'
import json, sys
path, graph, rc = sys.argv[1:4]
bench = lock = None
for line in open(path, errors="replace"):
    try:
        d = json.loads(line)
    except ValueError:
        continue
    if d.get("peer") == "gpuflow":
        bench = d
    elif d.get("bench") == "lock_profile" and d.get("mutex") == 0:
        lock = d  # the busiest mutex: the scheduler's
if not bench or not lock:
    print(f"| {graph} | FAIL (exit {rc}, no {'lock profile' if bench else 'result'}) | | | | |")
else:
    tasks = bench["tasks"] * (bench["repeats"] + 1)  # and the warm-up run
    held, waited = lock["held_s"] / tasks * 1e9, lock["waited_s"] / tasks * 1e9
    print(f"| {graph} | {bench['tasks_per_s'] / 1e6:.2f} M | {held:.1f} ns | {waited:.1f} ns "
          f"| {lock['acquired'] / tasks:.3f} | {1e3 / held:.1f} M tasks/s |")
EOF
)"
  done
}

# ---- scaling: the scheduler against CPU worker counts ---------------------------------------------------
# One gpuflow_bench --workers run (every count of `counts`, the caller's): its row into the
# details, its tasks/s into scaling_tps (empty where the run failed; `fails` counts those) and,
# in thousands, into scaling_kilo ("24796k/23000k/...").
scaling_run() {  # scaling_run LOG_NAME GRAPH N [gpuflow_bench options...]
  local log=$LOGS/scaling-$1.log g=$2 n=$3 rc=0 i line
  shift 3
  tmo $((10 * ${#counts[@]})) "$B/bench/gpuflow_bench" "$g" "$n" 3 \
    --workers "$(IFS=,; echo "${counts[*]}")" "$@" > "$log" 2>&1 || rc=$?
  scaling_tps=()
  if [ $rc = 0 ] && [ "$(jget "$log" bench '')" = scaling ]; then
    read -ra scaling_tps <<< "$(jget "$log" tasks_per_s '' | tr -d '[],')"
  fi
  line="| $g | $n |"
  scaling_kilo=""
  local kilo
  for i in "${!counts[@]}"; do
    if [ -z "${scaling_tps[$i]:-}" ]; then
      fails=$((fails + 1)); line="$line FAIL ($rc) |"
    else
      kilo=$(awk -v t="${scaling_tps[$i]}" 'BEGIN { printf "%.0fk", t / 1000 }')
      line="$line $kilo |"
      scaling_kilo="${scaling_kilo:+$scaling_kilo/}$kilo"
    fi
  done
  detail "$line"
}
# The last count's tasks/s over the second's (16 over 2 workers on a 16-core machine), from
# scaling_tps: "0.49x", or "?" where a run failed.
scaling_ratio() {
  local last=$((${#counts[@]} - 1))
  if [ -n "${scaling_tps[1]:-}" ] && [ -n "${scaling_tps[$last]:-}" ]; then
    awk -v a="${scaling_tps[$last]}" -v b="${scaling_tps[1]}" 'BEGIN { printf "%.2fx", a / b }'
  else
    echo "?"
  fi
}

step_scaling() {
  local counts=() w
  for w in 1 2 4 8 16; do [ "$w" -le "$nproc" ] && counts+=("$w"); done
  local -A size=([wide]=100000 [chain]=10000 [tree]=65536)
  local -A work_size=([wide]=100000 [tree]=65536)
  local rounds=3
  if [ $quick = 1 ]; then  # a check, not a measurement
    size=([wide]=5000 [chain]=1000 [tree]=2048)
    work_size=([wide]=2000 [tree]=1024)
    rounds=1
  fi
  local g fails=0 scaling_tps=() scaling_kilo="" header rule
  header="| graph | N | $(printf 'workers=%s | ' "${counts[@]}")"
  rule="| --- | --- | $(printf -- '--- | %.0s' "${counts[@]}")"
  local summary=() noop_ratios=() work_ratios=() us
  detail "No-op tasks:" "" "$header" "$rule"
  for g in wide chain tree; do
    scaling_run "$g" "$g" "${size[$g]}"
    summary+=("$g $scaling_kilo")
    noop_ratios+=("$g $(scaling_ratio)")
  done
  detail "" "tasks/s (thousands), gpuflow_bench GRAPH N 3 --workers $(IFS=,; echo "${counts[*]}"); raw JSON in the logs."
  # Tasks that do some work: how far more workers pay once a task is not empty (issue 29's target
  # is 16 workers >= 4x 2; no scheduler scales no-op tasks that far on real cores). At 1 us a
  # tree's tasks still queue for the scheduler's mutex; from 2-5 us they mostly do not.
  for us in 1 5; do
    detail "" "Tasks of $us us each (--work-us $us):" "" "$header" "$rule"
    local ratios=()
    for g in wide tree; do
      scaling_run "work$us-$g" "$g" "${work_size[$g]}" --work-us "$us"
      ratios+=("$g $(scaling_ratio)")
    done
    work_ratios+=("$us us tasks $(IFS=';'; echo "${ratios[*]}")")
  done
  # Taskflow's harness beside gpuflow at each count, when the kit carries it.
  local tf=$KIT/bin/taskflow_bench log rc=0
  if [ -x "$tf" ] && [ ${#counts[@]} -gt 1 ]; then
    log=$LOGS/scaling-vs-taskflow.log
    tmo 100 env BENCH="$B/bench/gpuflow_bench" python3 "$ROOT/bench/scaling_vs_taskflow.py" \
      "$rounds" "$(IFS=,; echo "${counts[*]}")" "$LD_LIBRARY_PATH" "$tf" > "$log" 2>&1 || rc=$?
    detail "" "gpuflow beside Taskflow (bench/scaling_vs_taskflow.py $rounds, exit $rc):"
    detail_log "$log" 14
    [ $rc = 0 ] || fails=$((fails + 1))
  else
    detail "" "No Taskflow harness in the kit (GPU_KIT_TASKFLOW_BENCH when building it)."
  fi
  # The mutex at 2 workers and at the most: how its hold per task grows with the workers.
  if [ "${counts[-1]}" -gt 2 ]; then lock_profile_at 2 size; fi
  lock_profile_at "${counts[-1]}" size
  local joined
  joined=$(IFS=';'; echo "${summary[*]}")
  figure="tasks/s at $(IFS=/; echo "${counts[*]}") workers: ${joined//;/; }"
  if [ "${counts[-1]}" -gt 2 ]; then
    joined=$(IFS=';'; echo "${noop_ratios[*]}")
    figure="$figure; ${counts[-1]} over 2 workers: no-op ${joined//;/, }"
    for joined in "${work_ratios[@]}"; do figure="$figure; ${joined//;/, }"; done
  fi
  if [ $fails = 0 ]; then result="PASS"; else result="FAIL ($fails runs)"; return 1; fi
}

cleanup() {
  mps_stop
  svc_stop
  write_report 2>/dev/null || true
  # The unpacked tree is ~50 MiB; the logs are in $OUT already. GPU_KIT_KEEP_WORK=1 keeps it.
  if [ -z "${GPU_KIT_KEEP_WORK:-}" ]; then rm -rf "$WORK"; else echo "run.sh: kept $WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "run.sh: kit $KIT (commit $KIT_COMMIT), repository $ROOT, report in $OUT, budget ${budget} s"
[ $have_gpu = 1 ] || echo "run.sh: $gpu_why: the GPU steps are skipped"
for s in "${steps[@]}"; do
  run_step "$s"
done
echo "run.sh: done in $(( $(date +%s) - started )) s; report: $OUT/gpu-report.md"
if [ $failed != 0 ]; then exit 1; fi
