#!/usr/bin/env bash
# Builds the library with clang and -Wthread-safety as errors, so the compiler checks the
# scheduler's concurrency contract (core/thread_safety.hpp, scheduler/scheduling_lock.hpp): every
# access to state guarded by the scheduler's mutex holds it. First a probe that the check is on:
# a file that reads a worker's ready queue without the mutex must be refused.
# scripts/check-thread-safety.sh [BUILD_DIR] (default build-tsa). Run by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-tsa}
probe=$(mktemp --suffix=.cpp)
trap 'rm -f "$probe"' EXIT
compiles() {  # compiles ANNOTATION: whether a read of a worker's queue so annotated compiles
  printf '#include "scheduler/worker_state.hpp"\nsize_t read(const gf::WorkerState &w) %s {\n  return w.ready.size();\n}\n' "$1" >"$probe"
  clang++ -std=c++20 -Isrc -Iinclude -Wthread-safety -Werror=thread-safety-analysis \
    -fsyntax-only "$probe" 2>/dev/null
}
if ! compiles "GF_REQUIRES(gf::scheduling_lock)"; then
  echo "check-thread-safety: the probe does not compile even with the mutex held" >&2
  exit 1
fi
if compiles ""; then
  echo "check-thread-safety: an unguarded read compiled: the analysis does not see the annotations" >&2
  exit 1
fi
# -O0 and only the library's objects: the check is the compiler's front end, and CI's time stays
# bounded (about 4 minutes on 2 cores).
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_FLAGS=-O0 -DGPUFLOW_WERROR=ON \
  -DGPUFLOW_WITH_CUDA=OFF -DGPUFLOW_BUILD_TESTS=OFF -DGPUFLOW_BUILD_EXAMPLES=OFF \
  -DGPUFLOW_BUILD_BENCH=OFF >/dev/null
cmake --build "$dir" -j "$(nproc)" --target gpuflow_objects
echo "check-thread-safety: the library builds with -Wthread-safety -Werror"
