#!/usr/bin/env python3
"""Scheduler throughput of several builds of libgpuflow and of Taskflow, interleaved in one run.

    bench/compare_libs.py ROUNDS wide,chain,tree base=/tmp/base-lib now=build-rel/src

Each NAME=DIR runs build-rel/bench/gpuflow_bench (BENCH overrides) with LD_LIBRARY_PATH=DIR, so one
set of binaries measures every build; DIR holds a libgpuflow.so.0. Taskflow's harness
(../shared/bench/taskflow_bench.cpp, built as ../shared/README.md says) runs when TASKFLOW_BENCH
names it. Every round runs each graph on each build, in an order that rotates by round, then on
Taskflow. Sizes are issue 29's: wide 100,000, chain 10,000, tree 131,072 (5 repeats each).
WORKERS (default 2) sets GPUFLOW_CPU_WORKERS and TF_WORKERS.

Prints, per graph, each build's median M tasks/s and its ratio to Taskflow's median, then the
median of the per-round ratios.
"""
import json
import os
import statistics
import subprocess
import sys

SIZES = {"wide": "100000", "chain": "10000", "tree": "131072"}
REPEATS = "5"


def tasks_per_s(cmd, env):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["tasks_per_s"] / 1e6


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    rounds = int(sys.argv[1])
    graphs = sys.argv[2].split(",")
    builds = dict(arg.split("=", 1) for arg in sys.argv[3:])
    bench = os.environ.get("BENCH", "build-rel/bench/gpuflow_bench")
    taskflow = os.environ.get("TASKFLOW_BENCH")
    workers = os.environ.get("WORKERS", "2")
    names = list(builds)
    sides = names + (["taskflow"] if taskflow else [])
    results = {}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for graph in graphs:
            for side in order + (["taskflow"] if taskflow else []):
                if side == "taskflow":
                    cmd = [taskflow, graph, SIZES[graph], REPEATS]
                    env = dict(os.environ, TF_WORKERS=workers)
                else:
                    cmd = [bench, graph, SIZES[graph], REPEATS]
                    env = dict(os.environ, LD_LIBRARY_PATH=builds[side],
                               GPUFLOW_CPU_WORKERS=workers)
                results.setdefault((graph, side), []).append(tasks_per_s(cmd, env))
    for graph in graphs:
        medians = {side: statistics.median(results[(graph, side)]) for side in sides}
        line = [graph]
        for side in sides:
            ratio = f" ({medians[side] / medians['taskflow']:.3f})" if taskflow else ""
            line.append(f"{side} {medians[side]:.2f}{ratio}")
        print("  ".join(line))
        if taskflow:
            per_round = {
                side: statistics.median(a / b for a, b in zip(results[(graph, side)],
                                                               results[(graph, "taskflow")]))
                for side in names
            }
            print("   per-round ratio medians:",
                  "  ".join(f"{side} {value:.3f}" for side, value in per_round.items()))


if __name__ == "__main__":
    main()
