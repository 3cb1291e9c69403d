# Shared by check-abi.sh and refresh-abi-baseline.sh (sourced). The ABI baseline of
# libgpuflow.so: abi/libgpuflow.abi (abidw, exported interfaces of the public headers only) and
# abi/libgpuflow.version (the version gpuflow.h had when it was taken).
baseline=abi/libgpuflow.abi
baseline_version_file=abi/libgpuflow.version

header_version() {
  local v
  for part in MAJOR MINOR PATCH; do
    v+=$(sed -n "s/^#define GF_VERSION_$part \([0-9]*\)$/\1/p" include/gpuflow.h).
  done
  echo "${v%.}"
}

library_of() {  # the built shared library of BUILD_DIR
  local lib=$1/src/libgpuflow.so
  [ -e "$lib" ] || { echo "no $lib: build first (cmake --build $1)" >&2; exit 1; }
  readlink -f "$lib"
}

# abidiff of the baseline against LIB: sets abi_rc (libabigail's bits: 1 error, 2 usage, 4 ABI
# changed, 8 incompatible change) and abi_report.
abi_compare() {
  set +e
  abi_report=$(abidiff --no-show-locs --headers-dir2 include "$baseline" "$1" 2>&1)
  abi_rc=$?
  set -e
}

abi_dump() {  # abi_dump LIB > file
  abidw --headers-dir include --drop-private-types --no-show-locs --no-corpus-path \
    --exported-interfaces-only "$1"
}
