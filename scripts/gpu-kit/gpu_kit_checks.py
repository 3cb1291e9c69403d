"""The GPU kit's Python checks, run by .gpu-kit/run.sh on a GPU machine (docs/gpu-kit.md).

    python3 gpu_kit_checks.py dask N C      CuPy-backed chunks through gpuflow.dask.get
    python3 gpu_kit_checks.py cluster N C   the same graph on gpuflow.dask.LocalGPUCluster

Both compute the seed workload, (normal(10, 1, (N, N)) + 1)[::2, ::2].sum(), with CuPy's
RandomState making the chunks on the GPU, annotated resources={"GPU": 1}, and check the sum
against 11 * ceil(N/2)^2 within 6 standard deviations. Each prints one JSON line last and exits
non-zero when the sum is off or the chunks were not CuPy arrays.
"""
import json
import math
import os
import sys
import time


def seed_expression(n, c):
    import cupy
    import dask
    import dask.array as da

    rs = da.random.RandomState(1234, RandomState=cupy.random.RandomState)
    with dask.annotate(resources={"GPU": 1}):
        x = rs.normal(10, 1, size=(n, n), chunks=(c, c))
        total = (x + 1)[::2, ::2].sum()
    return x, total


def sum_ok(value, n):
    m = (n + 1) // 2
    expected = 11.0 * m * m
    return abs(value - expected) <= 6.0 * m + 1e-12 * expected, expected


def check_dask(n, c):
    import gpuflow
    import gpuflow.dask

    x, total = seed_expression(n, c)
    chunk = x.blocks[0, 0].compute(scheduler=gpuflow.dask.get)
    chunk_type = f"{type(chunk).__module__}.{type(chunk).__name__}"
    times = []
    value = math.nan
    for _ in range(2):  # the first includes CuPy's kernel compilation
        t0 = time.perf_counter()
        value = float(total.compute(scheduler=gpuflow.dask.get))
        times.append(time.perf_counter() - t0)
    ok, expected = sum_ok(value, n)
    pool = gpuflow.dask.default_pool()
    gpus = [w for w in pool.workers() if w.kind == "gpu"]
    return {
        "check": "gpuflow.dask+cupy", "N": n, "C": c, "chunk_type": chunk_type,
        "first_seconds": round(times[0], 3), "seconds": round(times[-1], 3),
        "sum": value, "expected": expected, "sum_ok": ok,
        "gpu_workers": [f"{w.name} (device {w.device}{', emulated' if w.emulated else ''})"
                        for w in gpus],
        "ok": ok and chunk_type.startswith("cupy") and any(not w.emulated for w in gpus),
    }


def check_cluster(n, c):
    from distributed import Client
    from gpuflow.dask import LocalGPUCluster

    t0 = time.perf_counter()
    with LocalGPUCluster() as cluster, Client(cluster) as client:
        started = time.perf_counter() - t0
        visible = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)"))
        _, total = seed_expression(n, c)
        t1 = time.perf_counter()
        value = float(total.compute())
        seconds = time.perf_counter() - t1
    ok, expected = sum_ok(value, n)
    return {
        "check": "LocalGPUCluster", "N": n, "C": c, "workers": len(visible),
        "cuda_visible_devices": ",".join(sorted(set(visible.values()))),
        "start_seconds": round(started, 3), "seconds": round(seconds, 3),
        "sum": value, "expected": expected, "sum_ok": ok, "ok": ok and len(visible) > 0,
    }


def main(argv):
    if len(argv) != 4 or argv[1] not in ("dask", "cluster"):
        print(__doc__, file=sys.stderr)
        return 2
    n, c = int(argv[2]), int(argv[3])
    try:
        result = (check_dask if argv[1] == "dask" else check_cluster)(n, c)
    except Exception as e:  # the report wants a line whatever failed
        import traceback
        traceback.print_exc()
        result = {"check": argv[1], "ok": False, "error": f"{type(e).__name__}: {e}"[:300]}
    print(json.dumps(result))
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
