#!/usr/bin/env bash
# Builds gpuflow and runs every test: the normal build, then the AddressSanitizer +
# UndefinedBehaviorSanitizer build, the library under clang's thread-safety analysis, and a
# bounded fuzz run of the graph deserializer.
# GPUFLOW_TSAN=1 adds the ThreadSanitizer build.
# GPUFLOW_QUICK=1 runs the normal build only.
# GPUFLOW_LEAN=1 (CI sets it) removes each build tree once no later step needs it, so that the
# run's disk use peaks at the largest tree, not at their sum (the disk check below says how much).
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
# Formatting first: it takes seconds and needs no build (scripts/check-format.sh says how to fix).
scripts/check-format.sh

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

ran=()  # what ran and passed, for the closing line (set -e stops at the first failure)

run_suite() {  # run_suite BUILD_DIR [cmake args...]
  local dir=$1; shift
  echo "=== $dir ==="
  cmake -S . -B "$dir" -G Ninja -DGPUFLOW_BUILD_BENCH=ON -DGPUFLOW_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 300
  ran+=("ctest in $dir")
}

run_suite build
# The ABI of libgpuflow against the committed baseline (abi/; scripts/refresh-abi-baseline.sh).
scripts/check-abi.sh build
ran+=("the ABI check")
# What a user types: a Release build with default options (warnings are not errors there) must
# build everything, tests included.
# skippable NAME COMMAND...: runs a test that exits 77 to say it cannot run here (and why).
skippable() {
  local name=$1 rc=0
  shift
  "$@" || rc=$?
  if [ "$rc" -eq 77 ]; then
    echo "($name skipped: see above)"
  elif [ "$rc" -ne 0 ]; then
    exit "$rc"
  else
    ran+=("$name")
  fi
}
if [ -z "${GPUFLOW_QUICK:-}" ]; then
  echo "=== build-user-release ==="
  # Installed under /usr, as a package is: the same build then makes the Debian package.
  cmake -S . -B build-user-release -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
  cmake --build build-user-release -j "$jobs"
  ran+=("the Release build with default options")
  # The Debian package from that build: installed, used, purged (root only; docs/install.md).
  echo "=== the Debian package ==="
  skippable "the Debian package" scripts/test-deb.sh build-user-release
  lean build-user-release
fi
# The Rust binding against the plain build (generated bindings current, cargo test, examples).
scripts/test-rust.sh build
ran+=("the Rust binding")
# The Python binding, the Dask plugin and Dask's own test modules, against the plain build.
if [ -x scripts/test-python.sh ]; then
  scripts/test-python.sh build
  ran+=("the Python suites")
fi
# The wheel of the repository root in a fresh venv (docs/install.md, "A Python user").
if [ -z "${GPUFLOW_QUICK:-}" ]; then
  echo "=== the Python wheel ==="
  scripts/test-wheel.sh
  ran+=("the Python wheel")
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
fi
if [ -z "${GPUFLOW_QUICK:-}" ]; then
  # The scheduler's concurrency contract, checked by clang's thread-safety analysis.
  echo "=== build-tsa ==="
  scripts/check-thread-safety.sh build-tsa
  ran+=("the thread-safety build")
  lean build-tsa
fi
if [ -z "${GPUFLOW_QUICK:-}" ]; then
  # The graph deserializer takes untrusted bytes: a bounded libFuzzer run (clang).
  scripts/fuzz.sh "${GPUFLOW_FUZZ_SECONDS:-30}"
  ran+=("the fuzz run")
  lean build-fuzz
fi
if [ -n "${GPUFLOW_TSAN:-}" ]; then
  UCX_MEM_EVENTS=no \
    TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp" \
    run_suite build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUFLOW_SANITIZE=thread \
      -DGPUFLOW_WITH_CUDA=OFF
fi
summary=$(printf '%s; ' "${ran[@]}")
echo "test.sh: all passed: ${summary%; }"
