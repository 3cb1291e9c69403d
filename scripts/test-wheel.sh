#!/usr/bin/env bash
# The Python wheel, as a Python user gets it: builds the wheel of the repository root once
# (scikit-build-core: the native library, `gpuflow` and gpuflow-relay inside the package), installs
# it into a fresh venv, and from outside the checkout, with no GPUFLOW_* variable and no
# LD_LIBRARY_PATH, checks `import gpuflow` (its library loaded from the venv), `gpuflow info`,
# `gpuflow serve` with a `gpuflow lease` against it, a seed-sized Dask graph on LocalGPUCluster()
# checked against numpy, and `snakemake --executor gpuflow` (plugins/snakemake) leasing through
# the wheel's command.
#
#   scripts/test-wheel.sh [WHEEL]   # default: build one into build-wheel/dist
#
# The venv gets its packages from PyPI, pinned by bindings/python/requirements.txt as constraints.
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD
python=${GPUFLOW_PYTHON:-python3}
wheel=${1:-}
if [[ -z "$wheel" ]]; then
  echo "== pip wheel . (scikit-build-core)"
  rm -rf build-wheel/dist
  .venv/bin/pip wheel . -w build-wheel/dist --no-deps -q
  wheel=$(ls build-wheel/dist/gpuflow-*.whl)
fi
wheel=$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")
echo "wheel: $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"
"$python" - "$wheel" <<'EOF'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
missing = [f for f in ("gpuflow/libgpuflow.so.0", "gpuflow/bin/gpuflow",
                       "gpuflow/libexec/gpuflow/gpuflow-relay", "gpuflow/__init__.py")
           if f not in names]
if missing:
    sys.exit(f"test-wheel: not in the wheel: {', '.join(missing)}")
EOF

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuflow-wheel.XXXXXX")
serve_pid=""
cleanup() {
  [[ -n "$serve_pid" ]] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "test-wheel: FAILED: $*" >&2
  exit 1
}

echo "== a fresh venv: pip install the wheel[distributed]"
"$python" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check "$wheel[distributed]" numpy \
  -c bindings/python/requirements.txt || fail "pip install"

cd "$tmp"
unset LD_LIBRARY_PATH GPUFLOW_LIBRARY GPUFLOW_RELAY GPUFLOW_POOL GPUFLOW_TOKEN_FILE PYTHONPATH
export PATH="$tmp/venv/bin:/usr/bin:/bin"
export XDG_RUNTIME_DIR="$tmp/run"  # the default endpoint: nothing listens there
mkdir -m 700 "$tmp/run"

echo "== import gpuflow"
loaded=$(python -c 'import gpuflow, gpuflow._ffi as f; print(gpuflow.__version__, f.lib._name)')
echo "$loaded"
[[ "$loaded" == *"$tmp/venv/"* ]] || fail "the library was not loaded from the venv: $loaded"

echo "== gpuflow info, serve, lease"
gpuflow --version
gpuflow info --backend host --emulated-devices 1 | grep -q "gpu:0" || fail "gpuflow info"
gpuflow serve --backend host --emulated-devices 2 --socket "$tmp/s.sock" 2>"$tmp/serve.log" &
serve_pid=$!
for _ in $(seq 100); do [[ -S "$tmp/s.sock" ]] && break; sleep 0.1; done
[[ -S "$tmp/s.sock" ]] || { cat "$tmp/serve.log"; fail "gpuflow serve did not listen"; }
got=$(gpuflow lease --pool "unix://$tmp/s.sock" --gpus 1 -- sh -c 'echo "leased $GPUFLOW_DEVICES"')
[[ "$got" == "leased "[01] ]] || fail "gpuflow lease printed '$got'"
kill "$serve_pid"
wait "$serve_pid" || true
serve_pid=""

echo "== a seed-sized Dask graph on LocalGPUCluster()"
# A file, not stdin: Dask's nanny starts its workers by spawning, which re-imports __main__.
cat >"$tmp/cluster.py" <<'EOF'
import dask
import dask.array as da
import numpy as np
from distributed import Client
from gpuflow.dask import LocalGPUCluster

if __name__ == "__main__":
    with LocalGPUCluster(service_options={"emulated_devices": 2}) as cluster, \
            Client(cluster) as client:
        x = da.random.RandomState(7).random((4000, 4000), chunks=(1000, 1000))
        with dask.annotate(resources={"GPU": 1}):
            y = (x * 2 + 1).sum(axis=0)
        got = y.compute()
        np.testing.assert_allclose(got, (x.compute() * 2 + 1).sum(axis=0), rtol=1e-12)
        print("LocalGPUCluster:", len(cluster.workers), "workers, sum checked")
EOF
python "$tmp/cluster.py" || fail "LocalGPUCluster"

echo "== snakemake --executor gpuflow, two GPU jobs on the wheel's command"
(cd "$here" && "$tmp/venv/bin/pip" install -q --disable-pip-version-check ./plugins/snakemake \
  -c bindings/python/requirements.txt) || fail "pip install plugins/snakemake"
gpuflow serve --backend host --emulated-devices 2 --socket "$tmp/s.sock" 2>"$tmp/serve.log" &
serve_pid=$!
for _ in $(seq 100); do [[ -S "$tmp/s.sock" ]] && break; sleep 0.1; done
mkdir "$tmp/flow"
cat >"$tmp/flow/Snakefile" <<'EOF'
rule all:
    input: expand("out/{i}.txt", i=range(2))
rule gpu:
    output: "out/{i}.txt"
    resources: gpu=1
    shell: "echo $CUDA_VISIBLE_DEVICES > {output}"
EOF
(cd "$tmp/flow" && snakemake --executor gpuflow --gpuflow-endpoint "unix://$tmp/s.sock" \
  --cores 2 --nolock -q >"$tmp/snakemake.log" 2>&1) || { cat "$tmp/snakemake.log"; fail "snakemake"; }
for i in 0 1; do
  grep -q "^GPU-" "$tmp/flow/out/$i.txt" || fail "job $i ran without a leased device"
done
kill "$serve_pid"
wait "$serve_pid" || true
serve_pid=""
cd "$here"
echo "test-wheel: PASS"
