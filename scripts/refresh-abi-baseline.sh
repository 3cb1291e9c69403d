#!/usr/bin/env bash
# Rewrites the ABI baseline (abi/) from BUILD_DIR's libgpuflow.so (default: build) after a change
# to the public ABI. Refuses what scripts/check-abi.sh must never accept: an incompatible change
# without a major version bump, or additions without a minor version bump in include/gpuflow.h
# (GF_VERSION_MINOR; keep project(VERSION) in CMakeLists.txt in step).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/abi-common.sh
lib=$(library_of "${1:-build}")
version=$(header_version)
if [ -f "$baseline" ]; then
  old=$(cat "$baseline_version_file")
  abi_compare "$lib"
  if (( abi_rc & 3 )); then echo "$abi_report" >&2; exit 1; fi
  if (( abi_rc & 8 )) && [ "${version%%.*}" = "${old%%.*}" ]; then
    echo "$abi_report" >&2
    echo "refresh-abi-baseline: incompatible ABI change with the major version still ${old%%.*}: undo it (or bump GF_VERSION_MAJOR)" >&2
    exit 1
  fi
  if (( abi_rc & 4 )) && [ "${version%.*}" = "${old%.*}" ]; then
    echo "$abi_report" >&2
    echo "refresh-abi-baseline: the ABI changed but the version is still $old: bump GF_VERSION_MINOR in include/gpuflow.h (and project(VERSION) in CMakeLists.txt), rebuild, rerun" >&2
    exit 1
  fi
fi
abi_dump "$lib" >"$baseline"
echo "$version" >"$baseline_version_file"
echo "refresh-abi-baseline: wrote $baseline for gpuflow $version"
