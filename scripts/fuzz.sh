#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan, the library instrumented for coverage)
# and runs them for a bounded time: scripts/fuzz.sh [SECONDS] (35), split 4:3 between the graph
# deserializer and the service's control messages (wire). The corpora grow in
# build-fuzz/fuzz/corpus and build-fuzz/fuzz/wire_corpus; fuzz/seeds holds the seed documents
# (JSON and binary), fuzz/wire_seeds seed frames. A crash leaves crash-* in build-fuzz and exits
# non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-35}
graph_seconds=$((seconds * 4 / 7))
wire_seconds=$((seconds - graph_seconds))
scripts/install-deps.sh
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  "-DGPUFLOW_SANITIZE=address;undefined" -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link \
  -DGPUFLOW_FUZZ=ON -DGPUFLOW_WERROR=ON -DGPUFLOW_WITH_CUDA=OFF -DGPUFLOW_BUILD_EXAMPLES=OFF -DGPUFLOW_BUILD_BENCH=OFF \
  >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target fuzz_graph_deserialize fuzz_wire
mkdir -p build-fuzz/fuzz/corpus build-fuzz/fuzz/wire_corpus
cd build-fuzz
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  fuzz/fuzz_graph_deserialize -max_total_time="$graph_seconds" -rss_limit_mb=2048 -timeout=10 \
  -print_final_stats=1 fuzz/corpus ../fuzz/seeds
# UCX_MEM_EVENTS=no: UCX's load-time libc patching and sanitizers do not mix (docs/transport.md).
UCX_MEM_EVENTS=no LSAN_OPTIONS="suppressions=$PWD/../scripts/lsan.supp" \
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  fuzz/fuzz_wire -max_total_time="$wire_seconds" -rss_limit_mb=2048 -timeout=20 \
  -print_final_stats=1 fuzz/wire_corpus ../fuzz/wire_seeds
