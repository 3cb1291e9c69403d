#!/usr/bin/env python3
"""Dask distributed clusters side by side on one machine: Dask's LocalCluster (2 workers, one
thread each) against gpuflow.dask.LocalGPUCluster (2 workers on devices leased from a gpuflow
service with 2 emulated devices, one thread each), on the seed workload
    x = RandomState(42).normal(10, 1, (N, N), chunks=(C, C)); (x + 1)[::2, ::2].sum()
with N = 20,000, C = 2,000 (the issue's size). On the gpuflow cluster the whole expression is
annotated resources={"GPU": 1} (so every task must run on a leased device's worker); on Dask's
it is not annotated (its workers advertise no GPUs).

    .venv/bin/python bench/python/bench_dask_cluster.py               # ~5 min on 2 cores
    .venv/bin/python bench/python/bench_dask_cluster.py --quick       # N = 4,000, C = 1,000
    options: --rounds R (default 5)   --out FILE.jsonl

Both clusters are started once and kept; rounds alternate between them (ABAB...), each round
computing once on each after an untimed warm-up; the result is checked every time. Timed
region: build the array + compute. Cluster start-up is timed separately. Medians reported.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import dask
import dask.array as da


def seed(n, c):
    x = da.random.RandomState(42).normal(10, 1, size=(n, n), chunks=(c, c))
    return (x + 1)[::2, ::2].sum()


def timed(client, n, c, annotate, settings):
    with dask.config.set(settings):
        return _timed(client, n, c, annotate)


def _timed(client, n, c, annotate):
    start = time.perf_counter()
    if annotate:
        with dask.annotate(resources={"GPU": 1}):
            total = seed(n, c)
    else:
        total = seed(n, c)
    value = client.compute(total).result()
    return time.perf_counter() - start, float(value)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out")
    args = p.parse_args()
    n, c = (4_000, 1_000) if args.quick else (20_000, 2_000)

    import gpuflow
    from distributed import Client, LocalCluster
    from gpuflow.dask import LocalGPUCluster

    expected = None
    started = {}
    # LocalGPUCluster keeps annotations through optimisation for the whole process; Dask's peer
    # computes with Dask's own settings.
    dask_defaults = {k: dask.config.get(k) for k in ("optimization.fuse.active",
                                                     "optimization.annotations.fuse")}
    t0 = time.perf_counter()
    dask_cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                dashboard_address=None)
    started["dask LocalCluster"] = time.perf_counter() - t0
    socket_dir = tempfile.mkdtemp(prefix="bench-gpuflow-")
    service = gpuflow.Service(socket_path=os.path.join(socket_dir, "gf.sock"), log=False,
                              backend="host", emulated_devices=2, cpu_workers=2)
    t0 = time.perf_counter()
    gf_cluster = LocalGPUCluster(endpoint=service.endpoint, n_workers=2, dashboard_address=None)
    started["gpuflow LocalGPUCluster"] = time.perf_counter() - t0
    peers = {"dask LocalCluster": (dask_cluster, False),
             "gpuflow LocalGPUCluster": (gf_cluster, True)}
    settings = {"dask LocalCluster": dask_defaults, "gpuflow LocalGPUCluster": {}}
    clients = {name: Client(cluster) for name, (cluster, _) in peers.items()}
    times = {name: [] for name in peers}
    try:
        for name, (_, annotate) in peers.items():  # warm-up, untimed
            timed(clients[name], n, c, annotate, settings[name])
        for _ in range(args.rounds):
            for name, (_, annotate) in peers.items():
                seconds, value = timed(clients[name], n, c, annotate, settings[name])
                if expected is None:
                    expected = seed(n, c).compute(scheduler="sync") if args.quick else value
                assert abs(value - expected) <= 1e-9 * abs(expected), (name, value, expected)
                times[name].append(seconds)
    finally:
        for client in clients.values():
            client.close()
        gf_cluster.close()
        dask_cluster.close()
        service.stop()
        os.rmdir(socket_dir)

    base = statistics.median(times["dask LocalCluster"])
    print(f"seed workload N={n} C={c}, {args.rounds} interleaved rounds, "
          f"{platform.node()} ({os.cpu_count()} CPUs), {datetime.date.today()}")
    print(f"{'cluster':26} {'start s':>8} {'median s':>9} {'min s':>7} {'max s':>7} "
          f"{'vs Dask':>8}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:26} {started[name]:8.2f} {med:9.3f} {min(ts):7.3f} {max(ts):7.3f} "
              f"{base / med:7.2f}x")
    if args.out:
        with open(args.out, "a") as f:
            for name, ts in times.items():
                f.write(json.dumps({"peer": name, "n": n, "c": c, "times": ts,
                                    "start_s": started[name]}) + "\n")


if __name__ == "__main__":
    sys.exit(main())
