#!/usr/bin/env bash
# Builds gpuflow and runs every test: the normal build, then the AddressSanitizer +
# UndefinedBehaviorSanitizer build, the library under clang's thread-safety analysis, and a
# bounded fuzz run of the graph deserializer.
# GPUFLOW_TSAN=1 adds the ThreadSanitizer build.
# GPUFLOW_QUICK=1 runs the normal build only.
# GPUFLOW_LEAN=1 (CI sets it) removes each build tree once no later step needs it, so that the
# run's disk use peaks at the largest tree, not at their sum (the disk check below says how much).
# GPUFLOW_CI=1 (CI sets it) fails the run for a skip that this machine kind must run: only the
# reasons scripts/ci-allowed-skips.txt lists (no GPU) may skip there.
# It ends with a table of what ran (scripts/test-report.py): per step, tests run, passed, skipped
# (each with its reason) and failed, the time each step took, and the ten slowest tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)
# The suites emulate devices and hand device lists down themselves: a list this machine hands
# down (a GPU container's NVIDIA_VISIBLE_DEVICES, a Slurm job's GPUs) would narrow every
# emulated pool. ctest starts its tests without them anyway (cmake/test_environment.cmake); the
# Python, Rust and wheel checks below are not ctest's. A GPU test still finds the devices the
# container or the job's cgroup shows.
unset CUDA_VISIBLE_DEVICES NVIDIA_VISIBLE_DEVICES SLURM_STEP_GPUS SLURM_JOB_GPUS
# The disk the run needs, in GiB: every tree kept (a developer's incremental rebuilds) or, lean,
# the largest at once beside .venv. Measured on Debian 12 (2026-11-28): build 2.0, build-asan
# 2.6, build-tsan 1.8, build-fuzz 0.2, .venv 0.7, the wheel's venv in TMPDIR 0.7; the Debian
# packages come on top.
need=$([ -n "${GPUFLOW_LEAN:-}" ] && echo 4 || echo 9)
free=$(df -Pk . | awk 'NR == 2 { print int($4 / 1048576) }')
echo "disk: ${free} GiB free here; this run needs about ${need} GiB"
if [ "$free" -lt "$need" ]; then
  echo "test.sh: warning: only ${free} GiB free on $(df -P . | awk 'NR == 2 { print $6 }')," \
    "about ${need} GiB needed: a step may fail with 'No space left on device'" >&2
fi
lean() {  # lean DIR...: removes build trees no later step needs, when GPUFLOW_LEAN is set
  if [ -n "${GPUFLOW_LEAN:-}" ]; then
    echo "(lean: removing $*)"
    rm -rf "$@"
  fi
}

# What each step ran, for the closing table; kept outside the build trees that lean removes.
results=$PWD/build-results
rm -rf "$results"
mkdir -p "$results"
finish() {  # the table, on success and on failure alike
  local rc=$1 strict=()
  trap - EXIT
  [ -n "${GPUFLOW_CI:-}" ] && strict=(--strict scripts/ci-allowed-skips.txt)
  python3 scripts/test-report.py print "$results" "${strict[@]}" || rc=1
  [ "$rc" -eq 0 ] && echo "test.sh: all passed" || echo "test.sh: FAILED (exit $rc)" >&2
  exit "$rc"
}
trap 'finish $?' EXIT

# step NAME [--junit FILE]... [--cargo] [--skippable] -- COMMAND...: runs one step, timed, into
# the table. --skippable: exit status 77 means it cannot run here, its last line says why.
# --cargo and --skippable keep its output (shown when it ends) to read its tests or its reason.
step() {
  local name=$1 junit=() cargo=0 skippable=0
  shift
  while [ "$1" != "--" ]; do
    case $1 in
      --junit) junit+=(--junit "$2"); shift 2 ;;
      --cargo) cargo=1; shift ;;
      --skippable) skippable=1; shift ;;
    esac
  done
  shift
  local log extra=() outcome=passed reason="" rc=0 start=$SECONDS
  log=$results/$(tr -c 'A-Za-z0-9\n' _ <<<"$name").log
  if [ $cargo -eq 1 ] || [ $skippable -eq 1 ]; then
    "$@" >"$log" 2>&1 || rc=$?
    cat "$log"
  else
    "$@" || rc=$?
  fi
  [ $cargo -eq 1 ] && extra=(--cargo "$log")
  if [ $rc -eq 77 ] && [ $skippable -eq 1 ]; then
    outcome=skipped
    reason=$(grep -v '^\s*$' "$log" | tail -n 1)
  elif [ $rc -ne 0 ]; then
    outcome=failed
  fi
  python3 scripts/test-report.py add "$results" "$name" $((SECONDS - start)) "$outcome" \
    "${junit[@]}" "${extra[@]}" --reason "$reason"
  [ "$outcome" != failed ] || exit "$rc"
}

build_tree() {  # build_tree BUILD_DIR [cmake args...]
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null && cmake --build "$dir" -j "$jobs"
}

run_suite() {  # run_suite BUILD_DIR [cmake args...]
  local dir=$1; shift
  echo "=== $dir ==="
  step "build $dir" -- build_tree "$dir" -DGPUFLOW_BUILD_BENCH=ON -DGPUFLOW_WERROR=ON "$@"
  step "ctest $dir" --junit "$results/ctest-$dir.xml" -- \
    ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 300 \
    --output-junit "$results/ctest-$dir.xml"
}

# First what takes seconds and needs no build: formatting (scripts/check-format.sh says how to
# fix), tests that judge by the clock (docs/testing.md), and the paths and tests the docs cite.
step "format" -- scripts/check-format.sh
step "tests judge by conditions" -- bash -c \
  'scripts/check-test-timing.py --self-test && scripts/check-test-timing.py'
step "docs cite what exists" -- scripts/check-docs.py

run_suite build
# The ABI of libgpuflow against the committed baseline (abi/; scripts/refresh-abi-baseline.sh).
step "ABI" -- scripts/check-abi.sh build
if [ -z "${GPUFLOW_QUICK:-}" ]; then
  # What a user types: a Release build with default options (warnings are not errors there)
  # must build everything, tests included; installed under /usr, as a package is: the same
  # build then makes the Debian package (installed, used, purged; root only; docs/install.md).
  echo "=== build-user-release ==="
  step "Release build, default options" -- build_tree build-user-release \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr
  echo "=== the Debian package ==="
  step "Debian package" --skippable -- scripts/test-deb.sh build-user-release
  lean build-user-release
fi
# The Rust binding against the plain build (generated bindings current, fmt, clippy, cargo test,
# examples).
step "Rust binding" --cargo -- scripts/test-rust.sh build
# The Python binding, the Dask plugin and Dask's own test modules, against the plain build.
export GPUFLOW_JUNIT_DIR=$results
step "Python suites" --junit "$results/python-binding.xml" --junit "$results/python-dask.xml" \
  --junit "$results/python-snakemake.xml" --junit "$results/python-dask-own.xml" -- \
  scripts/test-python.sh build
unset GPUFLOW_JUNIT_DIR
if [ -z "${GPUFLOW_QUICK:-}" ]; then
  # The wheel of the repository root in a fresh venv (docs/install.md, "A Python user").
  echo "=== the Python wheel ==="
  step "Python wheel" -- scripts/test-wheel.sh
  lean build-wheel
fi
lean build  # the Rust, Python and ABI checks above were its last users
if [ -z "${GPUFLOW_QUICK:-}" ]; then
  # UCX_MEM_EVENTS=no: UCX's load-time libc patching and sanitizers do not mix
  # (docs/transport.md, "UCX's memory hooks"). intercept_tls_get_addr=0: LeakSanitizer's
  # tracking of dynamic TLS (__tls_get_addr, here from the dlopened UCX) recorded a garbage
  # block for the gpuflow command ("DTLS 8 at 0x29b-0x240000139d") and its tracer crashed at
  # exit ("Tracer caught signal 11"), depending only on the build's memory layout.
  UCX_MEM_EVENTS=no ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0 \
    UBSAN_OPTIONS=print_stacktrace=1 \
    run_suite build-asan -DCMAKE_BUILD_TYPE=Debug "-DGPUFLOW_SANITIZE=address;undefined" \
      -DGPUFLOW_WITH_CUDA=OFF
  lean build-asan
  # The scheduler's concurrency contract, checked by clang's thread-safety analysis.
  echo "=== build-tsa ==="
  step "thread-safety analysis" -- scripts/check-thread-safety.sh build-tsa
  lean build-tsa
  # The graph deserializer takes untrusted bytes: a bounded libFuzzer run (clang).
  step "fuzz" -- scripts/fuzz.sh "${GPUFLOW_FUZZ_SECONDS:-30}"
  lean build-fuzz
fi
if [ -n "${GPUFLOW_TSAN:-}" ]; then
  UCX_MEM_EVENTS=no \
    TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp" \
    run_suite build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUFLOW_SANITIZE=thread \
      -DGPUFLOW_WITH_CUDA=OFF
fi
