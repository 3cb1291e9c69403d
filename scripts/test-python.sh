#!/usr/bin/env bash
# Runs the Python side of gpuflow against a built library:
#   scripts/test-python.sh BUILD_DIR        (the library is BUILD_DIR/src/libgpuflow.so)
# 1. the binding tests (bindings/python/tests), 2. the Dask plugin tests (plugins/dask/tests),
# 3. Dask's own dask/array/tests/test_array_core.py and dask/tests/test_delayed.py with gpuflow
#    as Dask's default scheduler (plugins/dask/gpuflow_dask_pytest.py; exclusions in
#    plugins/dask/README.md).
# Sets up .venv first (scripts/setup-python.sh). Exits non-zero if any suite fails; a suite that
# collects no tests is a failure (exit 1, not pytest's 5) unless GPUFLOW_PYTEST_ARGS (extra pytest
# arguments, split on whitespace, e.g. "-k annotations") narrows the selection on purpose: then it
# is reported and passes. GPUFLOW_PYTEST_JOBS=N runs Dask's modules with pytest-xdist on N processes.
# GPUFLOW_JUNIT_DIR=DIR writes each suite's results as DIR/python-SLUG.xml (scripts/test.sh reads them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ne 1 ]; then echo "usage: $0 BUILD_DIR" >&2; exit 2; fi
build=$1
if [ -d "$build" ]; then build=$(cd "$build" && pwd)      # relative to the current directory
elif [ -d "$root/$build" ]; then build=$root/$build; fi    # or to the repository root
lib=$build/src/libgpuflow.so
if [ ! -e "$lib" ]; then
  echo "test-python: $lib not found: build gpuflow first (cmake --build $1)" >&2
  exit 1
fi

"$root/scripts/setup-python.sh"
py=$root/.venv/bin/python
# Lint first (fast; ruff.toml says which rules).
"$root/.venv/bin/ruff" check --quiet "$root" || { echo "test-python: ruff check failed" >&2; exit 1; }
export GPUFLOW_LIBRARY=$lib
export PYTHONDONTWRITEBYTECODE=1
site=$("$py" -c 'import dask, os; print(os.path.dirname(os.path.dirname(dask.__file__)))')
read -r -a extra <<< "${GPUFLOW_PYTEST_ARGS:-}"
common=(-p no:cacheprovider -q -rfEs --timeout=600 "${extra[@]}")

failed=()
run_suite() {  # run_suite NAME SLUG pytest-args...: SLUG names its JUnit file in GPUFLOW_JUNIT_DIR
  local name=$1 slug=$2; shift 2
  echo "=== python: $name ==="
  local rc=0 junit=()
  [ -n "${GPUFLOW_JUNIT_DIR:-}" ] && junit=("--junitxml=$GPUFLOW_JUNIT_DIR/python-$slug.xml")
  (cd "$root" && "$py" -m pytest "${common[@]}" "${junit[@]}" "$@") || rc=$?
  if [ $rc -eq 5 ]; then
    if [ -n "${GPUFLOW_PYTEST_ARGS:-}" ]; then
      echo "test-python: $name: no tests selected by GPUFLOW_PYTEST_ARGS; not a failure"
      rc=0
    else
      echo "test-python: $name: no tests were collected; the suite is missing" >&2
      rc=1
    fi
  fi
  if [ $rc -ne 0 ]; then failed+=("$name (exit $rc)"); fi
}

run_suite "binding tests" binding bindings/python/tests
run_suite "Dask plugin tests" dask plugins/dask/tests
run_suite "Snakemake executor tests" snakemake plugins/snakemake/tests
xdist=()
if [ -n "${GPUFLOW_PYTEST_JOBS:-}" ]; then xdist=(-n "$GPUFLOW_PYTEST_JOBS"); fi
PYTHONPATH=$root/plugins/dask${PYTHONPATH:+:$PYTHONPATH} run_suite "Dask's own tests on gpuflow" dask-own \
  -p gpuflow_dask_pytest --rootdir="$site" "${xdist[@]}" \
  "$site/dask/array/tests/test_array_core.py" "$site/dask/tests/test_delayed.py"

if [ ${#failed[@]} -ne 0 ]; then
  printf 'test-python: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "test-python: all Python suites passed"
