#!/usr/bin/env python3
"""How long the scheduler's mutex is held per task, for several builds of libgpuflow, interleaved.

    bench/lock_hold.py ROUNDS head=/tmp/head-lib now=build-rel/src

Issue 29: however many workers run, a pool runs at most 1 / (time its scheduler's mutex is held
per task) tasks/s, so this figure bounds scaling on any machine, before a 16-core one measures it.
Each NAME=DIR runs build-rel/bench/gpuflow_bench (BENCH overrides) on wide 100,000, chain 10,000
and tree 131,072 (5 repeats) with LD_LIBRARY_PATH=DIR and build-rel/bench/liblock_profile.so
(LOCK_PROFILE overrides) preloaded. WORKERS (default 2) sets GPUFLOW_CPU_WORKERS. The busiest
mutex is the scheduler's. Prints per graph and build the medians over the rounds: held and
acquisitions per task (the untimed warm-up run included), tasks/s, and the ceiling 1 / held as a
multiple of the measured rate.
"""
import json
import os
import statistics
import subprocess
import sys

SIZES = {"wide": 100000, "chain": 10000, "tree": 131072}
REPEATS = 5


def measure(bench, lock_profile, graph, lib, workers):
    env = dict(os.environ, LD_LIBRARY_PATH=lib, GPUFLOW_CPU_WORKERS=workers,
               LD_PRELOAD=lock_profile)
    out = subprocess.run([bench, graph, str(SIZES[graph]), str(REPEATS)], env=env,
                         capture_output=True, text=True, check=True)
    lines = [json.loads(line) for line in (out.stdout + out.stderr).splitlines()
             if line.startswith("{")]
    result = next(d for d in lines if d.get("peer") == "gpuflow")
    lock = next(d for d in lines if d.get("bench") == "lock_profile" and d.get("mutex") == 0)
    tasks = result["tasks"] * (REPEATS + 1)
    return lock["held_s"] / tasks * 1e9, lock["acquired"] / tasks, result["tasks_per_s"] / 1e6


def main():
    if len(sys.argv) < 3 or not all("=" in a for a in sys.argv[2:]):
        sys.exit(__doc__)
    rounds = int(sys.argv[1])
    libs = dict(a.split("=", 1) for a in sys.argv[2:])
    here = os.path.dirname(os.path.abspath(__file__))
    build = os.path.join(os.path.dirname(here), "build-rel", "bench")
    bench = os.environ.get("BENCH", os.path.join(build, "gpuflow_bench"))
    lock_profile = os.environ.get("LOCK_PROFILE", os.path.join(build, "liblock_profile.so"))
    workers = os.environ.get("WORKERS", "2")
    results = {}
    for r in range(rounds):
        names = list(libs)
        names = names[r % len(names):] + names[:r % len(names)]  # rotate the order by round
        for graph in SIZES:
            for name in names:
                results.setdefault((graph, name), []).append(
                    measure(bench, lock_profile, graph, libs[name], workers))
    for graph in SIZES:
        for name in libs:
            runs = results[(graph, name)]
            held, acquired, rate = (statistics.median(x[i] for x in runs) for i in range(3))
            print(f"{graph:6} {name:10} held/task {held:6.1f} ns  locks/task {acquired:.3f}  "
                  f"tasks/s {rate:6.2f} M  ceiling {1e3 / held:6.1f} M/s = "
                  f"{1e3 / held / rate:.2f}x the measured rate")


if __name__ == "__main__":
    main()
