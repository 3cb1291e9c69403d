#!/usr/bin/env bash
# ctest gpu_kit.run_sh: the GPU kit's run.sh without building a kit (seconds, every build).
#   selftest.sh SOURCE_DIR LIBGPUFLOW GPUFLOW_CLI GPUFLOW_BENCH [LIBLOCK_PROFILE]
# 1. run.sh, gpu-kit.sh and test-gpu-kit.sh parse (bash -n) and are clean under ShellCheck where
#    it is installed; run.sh --list names every step; without kit.env it refuses (exit 2).
# 2. A small kit made here from this build's library, command and gpuflow_bench: run.sh --quick
#    with the GPU steps asked for, once with GPU_KIT_NO_GPU=1 and once with an nvidia-smi that
#    finds no GPU: every GPU step reports "skipped: no GPU", the kit and scaling steps PASS, run.sh
#    exits 0 and leaves three files in $OUT. With LIBLOCK_PROFILE (bench/lock_profile.c; x86-64,
#    no sanitizer), the scaling step's details carry the scheduler mutex's profile per graph.
# The whole kit (CUDA build, libraries, wheels, ctest on the unpacked tree) is tested by
# scripts/test-gpu-kit.sh, by hand: it costs a Release CUDA build (docs/gpu-kit.md).
set -euo pipefail
[ $# -eq 4 ] || [ $# -eq 5 ] ||
  { echo "usage: $0 SOURCE_DIR LIBGPUFLOW GPUFLOW_CLI GPUFLOW_BENCH [LIBLOCK_PROFILE]" >&2; exit 2; }
src=$1 lib=$2 cli=$3 bench=$4 lock_profile=${5:-}
# Nothing of a caller's run.sh settings (a kit run on a GPU machine runs this test too).
for v in "${!GPU_KIT_@}"; do unset "$v"; done
run_sh=$src/scripts/gpu-kit/run.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu-kit-selftest.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "selftest: FAILED: $*" >&2; exit 1; }

# ---- 1. structure --------------------------------------------------------------------------------
scripts=("$run_sh" "$src/scripts/gpu-kit.sh" "$src/scripts/test-gpu-kit.sh" "$0")
for s in "${scripts[@]}"; do bash -n "$s" || fail "$s does not parse"; done
if command -v shellcheck > /dev/null; then
  shellcheck "${scripts[@]}" || fail "shellcheck"
else
  echo "selftest: no shellcheck here; bash -n only"
fi
listed=$("$run_sh" --list | awk '{print $1}' | tr '\n' ' ')
[ "$listed" = "kit gpu ctest seed overhead spill service python scaling " ] ||
  fail "run.sh --list gave: $listed"
rc=0
"$run_sh" --steps kit > "$tmp/no-kit.log" 2>&1 || rc=$?
{ [ $rc = 2 ] && grep -q "no kit.env" "$tmp/no-kit.log"; } || fail "run.sh without a kit: exit $rc, $(cat "$tmp/no-kit.log")"

# ---- 2. a small kit, no GPU ----------------------------------------------------------------------
repo=$tmp/repo
k=$repo/.gpu-kit
mkdir -p "$k/lib/ucx" "$k/lib/cxx" "$k/wheels" "$k/python" "$tmp/stage/build/src" \
  "$tmp/stage/build/tools/gpuflow" "$tmp/stage/build/bench"
cp "$run_sh" "$k/run.sh"
cp -L "$lib" "$tmp/stage/build/src/libgpuflow.so.0"
cp -L "$cli" "$tmp/stage/build/tools/gpuflow/gpuflow"
cp -L "$bench" "$tmp/stage/build/bench/gpuflow_bench"
elf_files=(build/src/libgpuflow.so.0 build/tools/gpuflow/gpuflow build/bench/gpuflow_bench)
if [ -n "$lock_profile" ]; then
  cp -L "$lock_profile" "$tmp/stage/build/bench/liblock_profile.so"
  elf_files+=(build/bench/liblock_profile.so)
fi
tar -czf "$k/build.tar.gz" -C "$tmp/stage" build
printf '%s\n' "${elf_files[@]}" > "$k/elf-files.txt"
: > "$k/ctest-files.txt"
: > "$k/wheels/requirements.txt"
cat > "$k/kit.env" <<EOF
KIT_SOURCE_DIR='$repo'
KIT_BUILD_DIR='$tmp/build-link'
KIT_COMMIT='selftest'
KIT_DATE='$(date -u '+%Y-%m-%d %H:%M UTC')'
KIT_NVCC='none'
KIT_CUDA_ARCHS='none'
KIT_GLIBC_NEEDED='2.17'
KIT_GLIBCXX_NEEDED='3.4'
KIT_CXXABI_NEEDED='1.3'
EOF
mkdir -p "$tmp/fake-bin"
printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver." >&2\nexit 9\n' \
  > "$tmp/fake-bin/nvidia-smi"
chmod +x "$tmp/fake-bin/nvidia-smi"

check_run() {  # check_run NAME EXPECTED_SKIP ENV... : run.sh --quick, then its rows
  local name=$1 skip=$2
  shift 2
  local out=$tmp/out-$name rc=0
  mkdir -p "$out"
  (cd "$repo" && env "$@" OUT="$out" .gpu-kit/run.sh --quick --budget 100 \
     --steps gpu,seed,overhead,spill,service,python,scaling) > "$tmp/$name.log" 2>&1 || rc=$?
  [ $rc = 0 ] || { cat "$tmp/$name.log" >&2; fail "$name: run.sh exit $rc"; }
  local tsv=$out/gpu-results.tsv s r
  for s in kit scaling; do
    r=$(awk -F'\t' -v s="$s" '$1 == s {print $2}' "$tsv")
    case $r in PASS*) ;; *) cat "$tmp/$name.log" >&2; fail "$name: $s: ${r:-no row}" ;; esac
  done
  for s in gpu seed overhead spill service python; do
    r=$(awk -F'\t' -v s="$s" '$1 == s {print $2}' "$tsv")
    [ "$r" = "skipped: $skip" ] || fail "$name: $s: '${r:-no row}', expected 'skipped: $skip'"
  done
  [ "$(awk -F'\t' '$1 == "ctest"' "$tsv")" = "" ] || fail "$name: ctest ran though not asked for"
  [ "$(find "$out" -type f | wc -l)" = 3 ] || fail "$name: \$OUT holds $(ls "$out")"
  grep -q '^| scaling | PASS' "$out/gpu-report.md" || fail "$name: the report lacks the scaling row"
  # The scaling step's lock profile: a row per graph, each with its figures; or why there is none.
  # No-op tasks (wide, chain, tree), 1 us and 5 us tasks (wide, tree): a figure at every count.
  for us in 1 5; do
    grep -q "^Tasks of $us us each" "$out/gpu-report.md" ||
      fail "$name: the report lacks the $us us tasks"
  done
  [ "$(grep -cE '^\| (wide|chain|tree) \| [0-9]+ \|( [0-9]+k \|)+$' "$out/gpu-report.md")" = 7 ] ||
    fail "$name: the scaling tables lack rows: $(grep -A12 '^### scaling' "$out/gpu-report.md")"
  grep -q '^No Taskflow harness in the kit' "$out/gpu-report.md" ||
    fail "$name: no Taskflow harness, and no word why"
  if [ -n "$lock_profile" ]; then
    [ "$(grep -cE '^\| (wide|chain|tree) \| [0-9.]+ M \| [0-9.]+ ns \|' "$out/gpu-report.md")" -ge 3 ] ||
      fail "$name: the report lacks the scheduler mutex's profile: $(grep -A6 "scheduler's mutex" "$out/gpu-report.md")"
  else
    grep -q '^No lock profile: ' "$out/gpu-report.md" || fail "$name: no lock profile, and no word why"
  fi
  echo "selftest: $name: GPU steps skipped ($skip), kit and scaling PASS"
}
check_run no-gpu-variable "no GPU (GPU_KIT_NO_GPU is set)" GPU_KIT_NO_GPU=1
check_run nvidia-smi-without-gpu "no GPU" PATH="$tmp/fake-bin:$PATH"
echo "selftest: passed"
