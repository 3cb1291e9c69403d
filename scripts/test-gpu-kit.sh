#!/usr/bin/env bash
# Tests the GPU kit where there is no GPU (docs/gpu-kit.md, "How the kit is tested"):
#   1. builds it (scripts/gpu-kit.sh; GPU_KIT_REUSE=1 takes the .gpu-kit/ already there) and
#      checks its size (<= 60 MiB);
#   2. ldd: every binary's libraries resolve inside the kit, except glibc's own and the
#      system's libstdc++/libgcc_s (whose copies in lib/cxx must then resolve too);
#   3. the wheels install with --no-index into an empty target for CPython 3.12 (pip's
#      --python-version; and with a real python3.12, when there is one, dask and distributed
#      import from there);
#   4. runs .gpu-kit/run.sh --quick on a copy of the working tree, as the device tool does, in a
#      private mount namespace where /work is empty (the build and source paths baked into the
#      binaries lead nowhere until run.sh links them) and the system's copies of every library
#      the kit carries are hidden; the GPU steps must report "skipped: no GPU", the others PASS,
#      and $OUT must hold at most 8 files of at most 16 MiB.
# GPU_KIT_FULL=1 runs the whole ctest suite in step 4 instead of --quick's subset (minutes).
# GPU_KIT_KEEP=1 keeps the temporary directory (its path is printed).
set -euo pipefail
trap 'echo "test-gpu-kit: FAILED at line $LINENO: $BASH_COMMAND" >&2' ERR
root=$(cd "$(dirname "$0")/.." && pwd -P)
kit=$root/.gpu-kit
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-gpu-kit.XXXXXX")
if [ -n "${GPU_KIT_KEEP:-}" ]; then
  echo "test-gpu-kit: keeping $tmp"
else
  trap 'rm -rf "$tmp"' EXIT
fi
fail() { echo "test-gpu-kit: FAILED: $*" >&2; exit 1; }
passed=()

# ---- 1. the kit -------------------------------------------------------------------------------
if [ -n "${GPU_KIT_REUSE:-}" ] && [ -f "$kit/kit.env" ]; then
  echo "test-gpu-kit: reusing $kit"
else
  "$root/scripts/gpu-kit.sh"
fi
for f in run.sh kit.env build.tar.gz elf-files.txt ctest-files.txt python/gpu_kit_checks.py \
         python/gpuflow/__init__.py wheels/requirements.txt lib/ucx/libuct_cma.so.0; do
  [ -e "$kit/$f" ] || fail "the kit has no $f"
done
size=$(du -sb "$kit" | cut -f1)
[ "$size" -le $((60 * 1048576)) ] || fail "the kit is $size bytes, over 60 MiB"
passed+=("kit of $((size / 1048576)) MiB")

# ---- 2. libraries from the kit alone ---------------------------------------------------------------
tar -xzf "$kit/build.tar.gz" -C "$tmp"
b=$tmp/build
core='^(linux-vdso|ld-linux-x86-64|libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libanl)\.so'
cxx='^(libstdc\+\+|libgcc_s)\.so'
bad=()
checked=0
while IFS= read -r elf; do
  case $elf in build/*) path=$b/${elf#build/} ;; *) path=$kit/$elf ;; esac
  checked=$((checked + 1))
  # With lib/cxx last (as run.sh adds it where the system's libstdc++ is too old): everything but
  # glibc comes from the kit.
  while read -r name _ where _; do
    [[ $name =~ $core ]] && continue
    case $where in
      "$b"/*|"$kit"/*) ;;
      *) if [[ $name =~ $cxx ]]; then bad+=("$elf: $name => $where (lib/cxx lacks it)")
         else bad+=("$elf: $name => $where"); fi ;;
    esac
  done < <(LD_LIBRARY_PATH="$b/src:$kit/lib:$kit/lib/cxx" ldd "$path" 2>&1 | awk '/=>/ {print $1, $2, $3, $4}')
done < "$kit/elf-files.txt"
[ ${#bad[@]} -eq 0 ] || fail "libraries from outside the kit: ${bad[*]}"
passed+=("ldd of $checked files from the kit alone")

# ---- 3. the wheels, without a registry, for CPython 3.12 --------------------------------------------
platforms=(--platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64)
python3 -m pip install -q --disable-pip-version-check --no-index --find-links "$kit/wheels" \
  --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 "${platforms[@]}" \
  --target "$tmp/site-3.12" dask distributed > "$tmp/pip.log" 2>&1 ||
  { cat "$tmp/pip.log" >&2; fail "the kit's wheels do not install for CPython 3.12 without a registry"; }
installed=$(find "$tmp/site-3.12" -maxdepth 1 -name '*.dist-info' | wc -l)
shipped=$(grep -c '==' "$kit/wheels/requirements.txt")
[ "$installed" -eq "$shipped" ] ||
  fail "$shipped wheels in the kit, but dask + distributed installed $installed distributions"
py312=${GPU_KIT_PYTHON312:-}
if [ -z "$py312" ]; then
  for c in python3.12 "$(pyenv root 2>/dev/null)"/versions/3.12*/bin/python3.12; do
    if [ -n "$c" ] && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
      py312=$c
      break
    fi
  done
fi
if [ -n "$py312" ]; then
  "$py312" -m pip install -q --disable-pip-version-check --no-index --find-links "$kit/wheels" \
    --target "$tmp/site-py312" dask distributed > "$tmp/pip312.log" 2>&1 ||
    { cat "$tmp/pip312.log" >&2; fail "pip install with $py312 failed"; }
  PYTHONPATH="$kit/python:$tmp/site-py312" GPUFLOW_LIBRARY="$b/src/libgpuflow.so.0" \
    LD_LIBRARY_PATH="$b/src:$kit/lib" "$py312" -c \
    'import dask, distributed, gpuflow, gpuflow.dask; print("dask", dask.__version__, "distributed", distributed.__version__, "gpuflow", gpuflow.__version__)' \
    > "$tmp/py312.log" 2>&1 || { cat "$tmp/py312.log" >&2; fail "importing from the kit with $py312 failed"; }
  passed+=("$shipped wheels install for cp312 without a registry and import with $("$py312" -V 2>&1)")
else
  passed+=("$shipped wheels install for cp312 without a registry (no python3.12 here to import them)")
fi

# ---- 4. run.sh as the device tool runs it ---------------------------------------------------------
copy=$tmp/repo
mkdir -p "$copy"
(cd "$root" && git ls-files -z -co --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) |
  tar -xf - -C "$copy"
cp -a "$kit" "$copy/.gpu-kit"
out=$tmp/out
mkdir -p "$out"
quick=(--quick)
if [ -n "${GPU_KIT_FULL:-}" ]; then  # the whole suite on 2 cores takes minutes, not run.sh's 110 s
  quick=()
  export GPU_KIT_LIMIT_ctest=${GPU_KIT_LIMIT_ctest:-1800} GPU_KIT_BUDGET=${GPU_KIT_BUDGET:-2400}
fi
export GPU_KIT_NO_GPU=1 OUT=$out
# shellcheck disable=SC2016  # expanded by the inner shell
inner='
set -euo pipefail
if [ -d /work ]; then mount -t tmpfs tmpfs /work; fi   # the real tree and its build dirs are gone
: > "$TMPDIR_EMPTY"
for f in "$KIT_COPY"/lib/*.so* "$KIT_COPY"/lib/ucx/*.so*; do
  name=$(basename "$f")
  for sys in $(ldconfig -p | awk -v n="$name" "\$1 == n && /x86-64/ {print \$NF}") \
             /usr/lib/x86_64-linux-gnu/ucx/"$name"; do
    [ -e "$sys" ] || continue
    real=$(readlink -f "$sys")
    case $real in "$KIT_COPY"/*) continue ;; esac
    mount --bind "$TMPDIR_EMPTY" "$real"
    echo "hidden: $real"
  done
done
cd "$REPO_COPY"
rc=0
.gpu-kit/run.sh "$@" || rc=$?
echo "run.sh exit $rc"
'
isolated=1
if ! unshare -m --propagation private true 2>/dev/null; then
  isolated=0
  echo "test-gpu-kit: no private mount namespace here (needs root): run.sh runs on the copy, without hiding /work or the system's libraries" >&2
fi
echo "test-gpu-kit: running run.sh ${quick[*]} on $copy"
if [ $isolated = 1 ]; then
  TMPDIR_EMPTY=$tmp/empty KIT_COPY=$copy/.gpu-kit REPO_COPY=$copy \
    unshare -m --propagation private bash -c "$inner" run "${quick[@]}" 2>&1 | tee "$tmp/run.log" || true
else
  (cd "$copy" && .gpu-kit/run.sh "${quick[@]}") 2>&1 | tee "$tmp/run.log" || true
fi
[ -s "$out/gpu-report.md" ] || fail "run.sh wrote no gpu-report.md"
[ -s "$out/gpu-results.tsv" ] || fail "run.sh wrote no gpu-results.tsv"
files=$(find "$out" -type f | wc -l)
[ "$files" -le 8 ] || fail "run.sh left $files files in \$OUT (at most 8 come back)"
if [ -n "$(find "$out" -type f -size +16M)" ]; then fail "a file in \$OUT is over 16 MiB"; fi
problems=()
for s in kit ctest scaling; do
  r=$(awk -F'\t' -v s="$s" '$1 == s {print $2}' "$out/gpu-results.tsv")
  case $r in PASS*) ;; *) problems+=("$s: ${r:-no row}") ;; esac
done
for s in gpu seed overhead spill service python; do
  r=$(awk -F'\t' -v s="$s" '$1 == s {print $2}' "$out/gpu-results.tsv")
  case $r in "skipped: no GPU"*) ;; *) problems+=("$s: ${r:-no row} (expected 'skipped: no GPU')") ;; esac
done
grep -q 'offers: .*cma' "$out/gpu-report.md" || problems+=("doctor: UCX's cma module not loaded from the kit")
grep -q "UCX [0-9.]* (${TMPDIR:-/tmp}/gpu-kit\.[A-Za-z0-9]*/lib/libucp\.so\.0)" "$out/gpu-report.md" ||
  problems+=("doctor: UCX not loaded from the kit's lib/")
if [ ${#problems[@]} -gt 0 ]; then
  sed -n '/^| step/,/^$/p' "$out/gpu-report.md" >&2
  fail "run.sh: ${problems[*]}"
fi
if [ $isolated = 1 ]; then
  passed+=("run.sh ${quick[*]:-(whole suite)} in a namespace without /work and with the system's copies hidden: GPU steps skipped, kit/ctest/scaling PASS, $files files in \$OUT")
else
  passed+=("run.sh ${quick[*]:-(whole suite)} on a copy (not isolated): GPU steps skipped, kit/ctest/scaling PASS")
fi
sed -n '/^| step/,/^$/p' "$out/gpu-report.md"
printf 'test-gpu-kit: passed: %s\n' "${passed[@]}"
