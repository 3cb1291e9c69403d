#!/usr/bin/env python3
"""The seed notebook (Dask's GPU walk-through), on gpuflow's embedded default pool.

    GPUFLOW_LIBRARY=build/src/libgpuflow.so .venv/bin/python examples/python/seed_notebook.py [N C]

1. A one-off task, like ``client.submit(lambda: 10 + 1)``.
2. The chunked array ``(normal(10, 1, (N, N), chunks=(C, C)) + 1)[::2, ::2].sum()`` computed by
   Dask through ``scheduler=gpuflow.dask.get``; checked against its expectation 11·(N/2)².
3. ``dask.annotate``: load on a CPU worker → process with ``resources={'GPU': 1}`` on a GPU
   worker → summarise on a CPU worker, each step reporting where it ran.

The default pool is gpuflow's embedded default: one CPU worker per core and, without a GPU, two
emulated devices (GPUFLOW_CPU_WORKERS, GPUFLOW_EMULATED_DEVICES, ... override it). Exits non-zero
if a check fails. Default size N=8000, C=1000 (the benchmark size is 20000 2000).
"""
import sys
import time

import dask
import dask.array as da
import numpy as np

import gpuflow
import gpuflow.dask


def where():
    """'cpu:0', 'gpu:1', ...: the worker running the current task."""
    env = gpuflow.current_task().env()
    return f"{env.kind}:{env.device if env.kind == 'gpu' else env.worker}"


def main(n=8000, c=1000):
    pool = gpuflow.dask.default_pool()  # gpuflow.Pool() with the embedded defaults
    print("pool:", pool)

    # 1. client.submit(lambda: 10 + 1)
    future = pool.submit(lambda: 10 + 1)
    print("1. submit(lambda: 10 + 1).result() =", future.result())
    assert future.result() == 11

    # 2. The chunked array, through Dask, on gpuflow.
    rs = da.random.RandomState(0)
    x = rs.normal(10, 1, size=(n, n), chunks=(c, c))
    y = (x + 1)[::2, ::2].sum()
    t0 = time.perf_counter()
    total = y.compute(scheduler=gpuflow.dask.get)
    seconds = time.perf_counter() - t0
    expected = 11.0 * ((n + 1) // 2) ** 2
    print(f"2. (normal(10, 1, ({n}, {n}), chunks={c}) + 1)[::2, ::2].sum() = {total:.6g} "
          f"(expected ~{expected:.6g}, {len(y.__dask_graph__())} tasks, {seconds:.2f} s)")
    assert abs(total / expected - 1) < 1e-3

    # 3. Annotations: CPU -> GPU=1 -> CPU.
    def load():
        return np.arange(1024, dtype=np.int64), where()

    def process(loaded):
        data, _ = loaded
        return data ** 2, where()

    def summarise(processed):
        data, _ = processed
        return int(data.sum()), where()

    loaded = dask.delayed(load)()
    with dask.annotate(resources={"GPU": 1}):
        processed = dask.delayed(process)(loaded)
    summary = dask.delayed(summarise)(processed)
    (l_data, l_where), (p_data, p_where), (total, s_where) = dask.compute(
        loaded, processed, summary, scheduler=gpuflow.dask.get)
    print(f"3. load on {l_where} -> process (GPU=1) on {p_where} -> summarise on {s_where}: "
          f"sum of squares = {total}")
    k = 1024
    assert total == (k - 1) * k * (2 * k - 1) // 6
    assert l_where.startswith("cpu") and p_where.startswith("gpu") and s_where.startswith("cpu")

    # The same with a chunked array: Dask's default optimization fuses these layers and would
    # drop the annotation; gpuflow.dask keeps it (the middle step runs on GPU workers).
    a = da.ones((4000, 4000), chunks=1000)
    with dask.annotate(resources={"GPU": 1}):
        b = a.map_blocks(lambda blk: blk + (gpuflow.current_task().env().kind == "gpu"),
                         dtype=float)
    on_gpu = int((b * 2).sum().compute(scheduler=gpuflow.dask.get)) // 2 - a.size
    print(f"   chunked: {on_gpu // 1_000_000} of {a.numblocks[0] * a.numblocks[1]} blocks "
          f"processed on GPU workers")
    assert on_gpu == a.size
    print("ok")


if __name__ == "__main__":
    args = [int(v) for v in sys.argv[1:3]]
    main(*args)
