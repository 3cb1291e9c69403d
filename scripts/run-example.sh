#!/usr/bin/env bash
# Builds gpuflow (Release) and runs the seed_array example on the embedded default pool.
# Usage: scripts/run-example.sh [N [C]]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUFLOW_BUILD_TESTS=OFF >/dev/null
cmake --build build-release --target seed_array
build-release/examples/seed_array "$@"
