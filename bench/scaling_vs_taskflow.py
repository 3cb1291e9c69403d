#!/usr/bin/env python3
"""gpuflow's scheduler and Taskflow at several worker counts, interleaved in one run.

    bench/scaling_vs_taskflow.py ROUNDS COUNTS LIBDIRS [TASKFLOW_BENCH]
    e.g. BENCH=build/bench/gpuflow_bench bench/scaling_vs_taskflow.py 3 1,2,4,8,16 build/src \\
             build-tf/taskflow_bench

For a machine with many cores (the GPU machine's 16): issue 29's target is tasks/s at 16 workers
>= 4x at 2. Every round runs each graph (issue 29's sizes, as bench/compare_libs.py) at each count
in COUNTS, on gpuflow (BENCH, default build-rel/bench/gpuflow_bench, with LD_LIBRARY_PATH=LIBDIRS
and GPUFLOW_CPU_WORKERS=count) and on Taskflow's harness (../shared/bench/taskflow_bench.cpp,
TF_WORKERS=count) when given; which side goes first alternates by round. Counts above the
machine's CPUs are skipped.

Prints, per graph and side, the median M tasks/s at each count and its ratio to the side's median
at the second count (2 in the example: the target's base), then gpuflow / Taskflow per count.
"""
import os
import statistics
import sys

from compare_libs import REPEATS, SIZES, tasks_per_s


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    rounds = int(sys.argv[1])
    counts = [int(c) for c in sys.argv[2].split(",") if int(c) <= os.cpu_count()]
    libdirs = sys.argv[3]
    taskflow = sys.argv[4] if len(sys.argv) > 4 else None
    bench = os.environ.get("BENCH", "build-rel/bench/gpuflow_bench")
    sides = ["gpuflow"] + (["taskflow"] if taskflow else [])
    results = {}
    for r in range(rounds):
        for graph in SIZES:
            for w in counts:
                for side in sides if r % 2 == 0 else reversed(sides):
                    if side == "taskflow":
                        cmd = [taskflow, graph, SIZES[graph], REPEATS]
                        env = dict(os.environ, TF_WORKERS=str(w))
                    else:
                        cmd = [bench, graph, SIZES[graph], REPEATS]
                        env = dict(os.environ, LD_LIBRARY_PATH=libdirs, GPUFLOW_CPU_WORKERS=str(w))
                    results.setdefault((graph, side, w), []).append(tasks_per_s(cmd, env))
        print(f"round {r + 1} of {rounds} done", file=sys.stderr, flush=True)
    base = counts[1] if len(counts) > 1 else counts[0]
    print(f"M tasks/s, median of {rounds} rounds (x the same side at {base} workers)")
    print("graph    side      " + "".join(f"{'w=' + str(w):>16}" for w in counts))
    for graph in SIZES:
        for side in sides:
            med = {w: statistics.median(results[(graph, side, w)]) for w in counts}
            cells = "".join(f"{med[w]:>8.2f} ({med[w] / med[base]:4.2f}x)" for w in counts)
            print(f"{graph:<8} {side:<9}{cells}")
        if taskflow:
            ratio = {w: statistics.median(results[(graph, "gpuflow", w)]) /
                     statistics.median(results[(graph, "taskflow", w)]) for w in counts}
            print(f"{graph:<8} {'gf/tf':<9}" + "".join(f"{ratio[w]:>16.3f}" for w in counts))


if __name__ == "__main__":
    main()
