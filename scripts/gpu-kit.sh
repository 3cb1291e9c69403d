#!/usr/bin/env bash
# Builds the GPU kit (docs/gpu-kit.md): everything a GPU machine without a package registry
# needs to run every GPU check of gpuflow in one call, collected in .gpu-kit/ (at most 60 MiB):
#   build.tar.gz   a Release build with the CUDA backend (sm_90 + PTX): library, gpuflow command,
#                  relay, tests with their ctest files, examples, benchmarks; stripped. ctest's
#                  files hold @GPU_KIT_BUILD@ / @GPU_KIT_SOURCE@ where the build had its paths
#   lib/           the shared libraries the binaries load that are not glibc (libuv, flatbuffers,
#                  libmicrohttpd and GnuTLS's chain, zlib, UCX and its modules in lib/ucx/);
#                  lib/cxx/ holds libstdc++ and libgcc_s, used only where the system's are older
#   python/        the gpuflow package (bindings/python/gpuflow) and gpu_kit_checks.py
#   wheels/        dask, distributed and their dependencies for CPython 3.12 manylinux x86_64,
#                  one version each, pinned by bindings/python/requirements.txt
#   run.sh         the one call on the GPU machine (scripts/gpu-kit/run.sh)
#   kit.env, elf-files.txt, ctest-files.txt, MANIFEST.txt   what run.sh and its readers need
#   bin/           taskflow_bench, when GPU_KIT_TASKFLOW_BENCH names Taskflow's harness
# Usage: scripts/gpu-kit.sh            (GPU_KIT_JOBS=N builds with N jobs; default 2)
# The build tree is build-gpu-kit/ (reused; kept between runs); downloaded wheels are kept in
# build-gpu-kit/wheels/, so a second run needs no network.
set -euo pipefail
trap 'echo "gpu-kit: FAILED at line $LINENO: $BASH_COMMAND" >&2' ERR
root=$(cd "$(dirname "$0")/.." && pwd -P)
build=$root/build-gpu-kit
kit=$root/.gpu-kit
jobs=${GPU_KIT_JOBS:-2}
max_mib=60
nvcc=/usr/local/cuda/bin/nvcc

die() { echo "gpu-kit: $*" >&2; exit 1; }
[ -x "$nvcc" ] || command -v nvcc >/dev/null ||
  die "no nvcc (at $nvcc or on PATH): the kit needs the CUDA backend"
"$root/scripts/install-deps.sh"

# ---- 1. The build ------------------------------------------------------------------------------
echo "gpu-kit: building $build (Release, CUDA sm_90 + PTX, $jobs jobs)"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUFLOW_WITH_CUDA=ON \
  "-DCMAKE_CUDA_ARCHITECTURES=90-real;75-virtual" -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON \
  -DGPUFLOW_BUILD_TESTS=ON -DGPUFLOW_BUILD_EXAMPLES=ON -DGPUFLOW_BUILD_BENCH=ON > /dev/null
cmake --build "$build" -j "$jobs"
{ [ -x "$build/tests/gpu/gpu_cuda_test" ] && [ -x "$build/bench/gpu_spill" ]; } ||
  die "$build has no CUDA backend (no tests/gpu/gpu_cuda_test, bench/gpu_spill)"

rm -rf "$kit"
mkdir -p "$kit/lib/ucx" "$kit/lib/cxx" "$kit/python" "$kit/wheels"
stage=$(mktemp -d "${TMPDIR:-/tmp}/gpu-kit-stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT

is_elf() { [ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]; }
# A test that runs ctest itself names this machine's (devices.lists_kept_from_tests): the GPU
# machine's is elsewhere.
build_ctest=$(sed -n 's/^CMAKE_CTEST_COMMAND:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)
build_ctest=${build_ctest:-/usr/bin/ctest}
sed_escape() { printf '%s' "$1" | sed 's/[][\\/.*^$|]/\\&/g'; }

# ---- 2. The build tree's binaries and ctest files, stripped, paths as placeholders -------------
echo "gpu-kit: collecting the build tree"
sb=$stage/build
mkdir -p "$sb"
(cd "$build" && find . -type d \( -name CMakeFiles -o -name Testing -o -name generated -o -name wheels \) \
   -prune -o -type d -print) | while IFS= read -r d; do mkdir -p "$sb/$d"; done
: > "$stage/elf-files.txt"
: > "$stage/ctest-files.txt"
(cd "$build" && find . -type d \( -name CMakeFiles -o -name Testing -o -name generated -o -name wheels \) \
   -prune -o \( -type f -o -type l \) -print | sed 's|^\./||' | sort) | while IFS= read -r f; do
  src=$build/$f
  case $f in
    *.a|*.o|*.ninja|.ninja_*|cmake_install.cmake|*/cmake_install.cmake|CMakeCache.txt|compile_commands.json) continue ;;
  esac
  if [ -L "$src" ]; then
    cp -P "$src" "$sb/$f"                       # libgpuflow.so -> .so.0 -> .so.0.7.0
  elif case $f in CTestTestfile.cmake|*/CTestTestfile.cmake|*_include.cmake|*_tests.cmake) true ;; *) false ;; esac; then
    sed -e "s/$(sed_escape "$build")/@GPU_KIT_BUILD@/g" -e "s/$(sed_escape "$root")/@GPU_KIT_SOURCE@/g" \
      -e "s/$(sed_escape "$build_ctest")/@GPU_KIT_CTEST@/g" "$src" > "$sb/$f"
    echo "$f" >> "$stage/ctest-files.txt"
  elif is_elf "$src"; then
    strip --strip-unneeded -o "$sb/$f" "$src"
    chmod --reference="$src" "$sb/$f"
    echo "build/$f" >> "$stage/elf-files.txt"
  fi
done
if grep -rqF "$build" --include='*.cmake' "$sb"; then
  die "a ctest file still names $build"
fi
tar -czf "$kit/build.tar.gz" -C "$stage" build

# ---- 3. Shared libraries: what the binaries and UCX load, minus glibc --------------------------
echo "gpu-kit: collecting shared libraries"
# (awk reads to the end: a reader that stops early would end ldconfig with SIGPIPE, and pipefail.)
ucx_lib=$(ldconfig -p | awk '/libucp\.so\.0 .*x86-64/ && !found {print $NF; found = 1}')
[ -n "$ucx_lib" ] || die "libucp.so.0 not found (libucx0)"
ucx_modules=$(dirname "$(readlink -f "$ucx_lib")")/ucx
[ -e "$ucx_modules/libuct_cma.so.0" ] || die "no UCX modules in $ucx_modules"
# Only the shared-memory module: the data plane uses shared memory (and TCP, built into libuct);
# the InfiniBand/RDMA modules would pull in rdma-core for nothing.
cp -L "$ucx_modules/libuct_cma.so.0" "$kit/lib/ucx/"
# glibc's own libraries stay the system's (the device's glibc must be new enough: kit.env).
core='^(linux-vdso|ld-linux-x86-64|libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libanl)\.so'
cxx='^(libstdc\+\+|libgcc_s)\.so'
targets=()
while IFS= read -r e; do targets+=("$sb/${e#build/}"); done < "$stage/elf-files.txt"
targets+=("$ucx_lib" "$kit/lib/ucx/libuct_cma.so.0")
missing=()
for t in "${targets[@]}"; do
  while read -r name _ path _; do
    [ "$name" = "${name#lib}" ] && [ "$name" = "${name#ld-}" ] && continue
    [[ $name =~ $core ]] && continue
    [[ $name == libgpuflow.so* ]] && continue
    if [ "$path" = "not" ] || [ -z "$path" ]; then missing+=("$t: $name"); continue; fi
    if [[ $name =~ $cxx ]]; then dest=$kit/lib/cxx/$name; else dest=$kit/lib/$name; fi
    [ -e "$dest" ] || cp -L "$path" "$dest"
  done < <(LD_LIBRARY_PATH="$sb/src" ldd "$t" 2>/dev/null | awk '/=>/ {print $1, $2, $3, $4}')
done
[ ${#missing[@]} -eq 0 ] || die "unresolved libraries: ${missing[*]}"
cp -L "$ucx_lib" "$kit/lib/libucp.so.0"
for f in "$kit"/lib/*.so* "$kit"/lib/ucx/*.so*; do echo "${f#"$kit"/}" >> "$stage/elf-files.txt"; done

# Taskflow's harness, when GPU_KIT_TASKFLOW_BENCH names one (../shared/bench/taskflow_bench.cpp,
# built as ../shared/README.md says): the scaling step runs it beside gpuflow at each count.
if [ -n "${GPU_KIT_TASKFLOW_BENCH:-}" ]; then
  if ! [ -x "$GPU_KIT_TASKFLOW_BENCH" ] || ! is_elf "$GPU_KIT_TASKFLOW_BENCH"; then
    die "GPU_KIT_TASKFLOW_BENCH=$GPU_KIT_TASKFLOW_BENCH is not an executable"
  fi
  mkdir -p "$kit/bin"
  strip --strip-unneeded -o "$kit/bin/taskflow_bench" "$GPU_KIT_TASKFLOW_BENCH"
  chmod +x "$kit/bin/taskflow_bench"
  echo "bin/taskflow_bench" >> "$stage/elf-files.txt"
fi

# What the device must offer: the highest symbol versions any of the kit's files needs.
need() {  # need PREFIX FILES...: the highest PREFIX_x.y.z version referenced
  for f in "${@:2}"; do objdump -T "$f" 2>/dev/null; done | grep -o "$1_[0-9][0-9.]*" |
    sed "s/^$1_//" | sort -Vu | tail -1
}
mapfile -t all_elf < <(sed "s|^build/|$sb/|; t; s|^|$kit/|" "$stage/elf-files.txt")
glibc_needed=$(need GLIBC "${all_elf[@]}")
glibcxx_needed=$(need GLIBCXX "${all_elf[@]}")
cxxabi_needed=$(need CXXABI "${all_elf[@]}")

# ---- 4. Python: the package, the checks, the wheels ---------------------------------------------
echo "gpu-kit: the Python package and wheels"
(cd "$root/bindings/python" && tar -cf - --exclude=__pycache__ gpuflow) | tar -xf - -C "$kit/python"
cp "$root/scripts/gpu-kit/gpu_kit_checks.py" "$kit/python/"
wheel_cache=$build/wheels
mkdir -p "$wheel_cache"
pip_target=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64)
# dask and distributed without extras (numpy and the rest of the image are the device's own),
# pinned by the repository's requirements; the cache first, the index only when it lacks one.
want=(dask distributed)
constraints=$root/bindings/python/requirements.txt
if ! python3 -m pip download -q --disable-pip-version-check --no-index --find-links "$wheel_cache" \
       "${pip_target[@]}" -c "$constraints" -d "$wheel_cache" "${want[@]}" > /dev/null 2>&1; then
  python3 -m pip download -q --disable-pip-version-check "${pip_target[@]}" -c "$constraints" \
    -d "$wheel_cache" "${want[@]}" ||
    die "pip download failed: the wheels come from PyPI (or a mirror) once, then from $wheel_cache"
fi
# Exactly the resolved set into the kit: one version each, nothing stale from the cache.
python3 -m pip download -q --disable-pip-version-check --no-index --find-links "$wheel_cache" \
  "${pip_target[@]}" -c "$constraints" -d "$kit/wheels" "${want[@]}" > /dev/null
ls "$kit"/wheels/*.whl > /dev/null 2>&1 || die "no wheels resolved from $wheel_cache"
for w in "$kit"/wheels/*.whl; do
  basename "$w" | awk -F- '{print $1 "==" $2}'
done | sort -f > "$kit/wheels/requirements.txt"

# ---- 5. run.sh and what it reads -----------------------------------------------------------------
cp "$root/scripts/gpu-kit/run.sh" "$kit/run.sh"
chmod +x "$kit/run.sh"
cp "$stage/elf-files.txt" "$stage/ctest-files.txt" "$kit/"
commit=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
os_name=$(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release 2>/dev/null || uname -sr)
cat > "$kit/kit.env" <<EOF
# Written by scripts/gpu-kit.sh; read by run.sh.
KIT_SOURCE_DIR='$root'
KIT_BUILD_DIR='$build'
KIT_COMMIT='$commit'
KIT_DATE='$(date -u '+%Y-%m-%d %H:%M UTC')'
KIT_NVCC='$("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/nvcc \1/p')'
KIT_CUDA_ARCHS='$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt")'
KIT_GLIBC_NEEDED='$glibc_needed'
KIT_GLIBCXX_NEEDED='$glibcxx_needed'
KIT_CXXABI_NEEDED='$cxxabi_needed'
KIT_BUILD_OS='$os_name, $(getconf GNU_LIBC_VERSION)'
EOF

# ---- 6. What is in it, and how big --------------------------------------------------------------
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
total=$(du -sb "$kit" | cut -f1)
{
  echo "gpuflow GPU kit, commit $commit, built $(date -u '+%Y-%m-%d %H:%M UTC') on $os_name"
  echo "needs on the GPU machine: glibc >= $glibc_needed, libstdc++ with GLIBCXX_$glibcxx_needed (else lib/cxx), an NVIDIA driver for CUDA ${KIT_NVCC:-13}, CMake (ctest), Python 3.12"
  echo
  echo "build.tar.gz  $(mib "$(stat -c %s "$kit/build.tar.gz")") packed, $(mib "$(du -sb "$sb" | cut -f1)") unpacked: $(grep -c '^build/' "$stage/elf-files.txt") stripped binaries, $(wc -l < "$stage/ctest-files.txt") ctest files, $( (cd "$build" && ctest -N 2>/dev/null) | awk '/^Total Tests:/ {print $3}') tests"
  echo "lib/          $(mib "$(du -sb "$kit/lib" | cut -f1)"): $(cd "$kit/lib" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ')"
  echo "python/       $(mib "$(du -sb "$kit/python" | cut -f1)"): gpuflow package, gpu_kit_checks.py"
  echo "wheels/       $(mib "$(du -sb "$kit/wheels" | cut -f1)"): $(grep -v '^#' "$kit/wheels/requirements.txt" | tr '\n' ' ')"
  if [ -e "$kit/bin/taskflow_bench" ]; then
    echo "bin/          taskflow_bench (Taskflow's harness, for the scaling step)"
  else
    echo "bin/          none: no Taskflow harness (GPU_KIT_TASKFLOW_BENCH=PATH adds one)"
  fi
  echo "run.sh        the one call: bash .gpu-kit/run.sh (--list names its steps)"
  echo
  echo "total         $(mib "$total") (limit $max_mib MiB)"
} > "$kit/MANIFEST.txt"
cat "$kit/MANIFEST.txt"
[ "$total" -le $((max_mib * 1048576)) ] || die "the kit is $(mib "$total"), over $max_mib MiB"
echo
echo "gpu-kit: ready. On a GPU machine (device tool: carry [\".gpu-kit\"], command"
echo "         \"bash .gpu-kit/run.sh\", timeout_s 480) the report comes back as \$OUT/gpu-report.md;"
echo "         docs/gpu-kit.md."
