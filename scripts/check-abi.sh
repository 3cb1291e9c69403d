#!/usr/bin/env bash
# Compares BUILD_DIR's libgpuflow.so (default: build) with the committed ABI baseline (abi/,
# libabigail's abidiff) and fails on any difference: an incompatible change always, an addition
# until the minor version is bumped and the baseline refreshed (scripts/refresh-abi-baseline.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/abi-common.sh
lib=$(library_of "${1:-build}")
abi_compare "$lib"
version=$(header_version)
old=$(cat "$baseline_version_file")
if (( abi_rc & 3 )); then
  echo "$abi_report" >&2
  echo "check-abi: abidiff failed (status $abi_rc)" >&2
  exit 1
elif (( abi_rc & 8 )); then
  echo "$abi_report" >&2
  echo "check-abi: INCOMPATIBLE change to the ABI of libgpuflow (above): existing callers would break. Undo it; fields are only appended and functions only added." >&2
  exit 1
elif (( abi_rc & 4 )); then
  echo "$abi_report" >&2
  echo "check-abi: the ABI grew (above; compatible). Bump GF_VERSION_MINOR in include/gpuflow.h (and project(VERSION) in CMakeLists.txt) unless already done for this release, rebuild, then run scripts/refresh-abi-baseline.sh and commit abi/." >&2
  exit 1
elif [ "$version" != "$old" ]; then
  echo "check-abi: gpuflow.h says $version, the baseline was taken at $old: run scripts/refresh-abi-baseline.sh and commit abi/." >&2
  exit 1
fi
echo "check-abi: libgpuflow $version matches the baseline (abi/libgpuflow.abi)"
