#!/usr/bin/env python3
"""gpuflow against Taskflow on what users submit, for one or more builds, interleaved in one run.

    TASKFLOW_BENCH=/tmp/taskflow_bench bench/vs_taskflow.py [--rounds 3] [--out FILE]
        [--sizes wide=100000,chain=10000,tree=65536] NAME=LIBDIR [NAME=LIBDIR ...]

Each NAME=LIBDIR runs build-rel/bench/gpuflow_bench (BENCH overrides) with
LD_LIBRARY_PATH=LIBDIR, so one set of binaries measures every build (a before and an after library
side by side); LIBDIR holds a libgpuflow.so.0. TASKFLOW_BENCH names Taskflow's harness
(../shared/bench/taskflow_bench.cpp, built as ../shared/README.md says). WORKERS (default 2)
sets GPUFLOW_CPU_WORKERS and TF_WORKERS; REPEATS (default 5) the timed runs per process.

Every round runs, for each graph, each side once in a fresh process: Taskflow, and per build
gpuflow_bench without resources and with --resources cpu=1,bigmem=0.25. The order of the sides
reverses every other round. Medians over the rounds, per build and graph:

  one-shot   first_build_s + first_run_s: the graph built and run once on a fresh pool in a fresh
             process; Taskflow's time / gpuflow's (speed ratio), target >= 1.0
  steady     median_s, the same graph again on a pool that has run it; Taskflow's / gpuflow's,
             target >= 1.0
  build      build_median_s; gpuflow's time / Taskflow's, target <= 1.4 for wide (the others are
             shown without a target)
  resources  gpuflow's steady-state tasks/s with the resources over its tasks/s without,
             target >= 0.7

Prints one table per build and writes every JSON line the binaries printed to --out (default
vs_taskflow.jsonl) as printed, with "side", "round" and "libdir" added. Exit status 3 when a
target is missed, as graph_io_bench does.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

SIZES = "wide=100000,chain=10000,tree=65536"
RESOURCES = "cpu=1,bigmem=0.25"


def run(cmd, env):
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"vs_taskflow: {' '.join(cmd)} exited {done.returncode}:\n{done.stderr}")
    text = done.stdout.strip().splitlines()[-1]
    return text, json.loads(text)


def parse_args():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="vs_taskflow.jsonl")
    parser.add_argument("--sizes", default=SIZES,
                        help="GRAPH=N,...: the graphs to run and their sizes (%(default)s)")
    parser.add_argument("builds", nargs="+", metavar="NAME=LIBDIR")
    args = parser.parse_args()
    try:
        args.builds = dict(arg.split("=", 1) for arg in args.builds)
        args.sizes = dict(item.split("=", 1) for item in args.sizes.split(","))
    except ValueError:
        parser.error("builds are NAME=LIBDIR and --sizes is GRAPH=N,...")
    if "taskflow" in args.builds:
        parser.error("'taskflow' names Taskflow's side: name the builds otherwise")
    for graph, n in args.sizes.items():
        if graph not in ("wide", "chain", "tree") or not n.isdigit() or int(n) < 1:
            parser.error(f"--sizes: {graph}={n}: want wide, chain or tree = a count >= 1")
        if graph == "tree" and int(n) & (int(n) - 1):
            parser.error("--sizes: Taskflow's tree needs a power-of-two leaf count")
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    return args


def measure(args, bench, taskflow, workers, repeats, out):
    """Runs every round; returns {(side, graph): [JSON line per round]}."""
    # A side: (what its runs are filed under, binary, options after GRAPH N REPEATS, environment,
    # library directory).
    sides = []
    for name, libdir in args.builds.items():
        env = dict(os.environ, LD_LIBRARY_PATH=libdir, GPUFLOW_CPU_WORKERS=workers)
        sides.append((name, bench, [], env, libdir))
        sides.append((name + "+resources", bench, ["--resources", RESOURCES], env, libdir))
    sides.append(("taskflow", taskflow, [], dict(os.environ, TF_WORKERS=workers), None))
    results = {}
    for r in range(args.rounds):
        order = sides if r % 2 == 0 else sides[::-1]
        for graph, n in args.sizes.items():
            for key, binary, extra, env, libdir in order:
                text, line = run([binary, graph, n, repeats] + extra, env)
                results.setdefault((key, graph), []).append(line)
                # The line as printed (its figures' digits kept), with where it came from added.
                added = json.dumps({"side": key, "round": r, "libdir": libdir})[1:]
                out.write(f"{text.rstrip()[:-1]}, {added}\n")
                out.flush()
        print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)
    return results


def med(lines, field):
    return statistics.median(field(line) for line in lines)


def one_shot(line):
    return line["first_build_s"] + line["first_run_s"]


def report(args, results, workers):
    """Prints a table per build; returns the number of targets missed."""
    missed = 0
    for name, libdir in args.builds.items():
        print(f"\n{name} ({libdir}) vs Taskflow: {workers} workers, medians over {args.rounds} "
              f"round(s)")
        print(f"{'metric':<10} {'graph':<6} {'gpuflow':>12} {'reference':>12} {'ratio':>7}  "
              f"{'target':<8} result")
        for metric in ("one-shot", "steady", "build", "resources"):
            for graph in args.sizes:
                gf = results[(name, graph)]
                tf = results[("taskflow", graph)]
                if metric == "resources":
                    with_res = med(results[(name + "+resources", graph)],
                                   lambda line: line["tasks_per_s"])
                    without = med(gf, lambda line: line["tasks_per_s"])
                    mine, ref = f"{with_res / 1e6:.2f} M/s", f"{without / 1e6:.2f} M/s"
                    ratio, target = with_res / without, ">= 0.7"
                    met = ratio >= 0.7
                else:
                    field = {"one-shot": one_shot, "steady": lambda line: line["median_s"],
                             "build": lambda line: line["build_median_s"]}[metric]
                    a, b = med(gf, field), med(tf, field)
                    mine, ref = f"{a * 1e3:.3f} ms", f"{b * 1e3:.3f} ms"
                    if metric == "build":
                        ratio = a / b
                        target, met = (("<= 1.4", ratio <= 1.4) if graph == "wide"
                                       else ("-", None))
                    else:
                        ratio, target = b / a, ">= 1.0"
                        met = ratio >= 1.0
                result = "" if met is None else "met" if met else "not met"
                missed += met is False
                print(f"{metric:<10} {graph:<6} {mine:>12} {ref:>12} {ratio:>7.3f}  {target:<8} "
                      f"{result}")
        # Where a one-shot graph's time goes: the part to work on first.
        for graph in args.sizes:
            parts = []
            for side in (name, "taskflow"):
                lines = results[(side, graph)]
                parts.append(f"{side} {med(lines, lambda line: line['first_build_s']) * 1e3:.3f}"
                             f" + {med(lines, lambda line: line['first_run_s']) * 1e3:.3f}")
            print(f"one-shot {graph}, first build + first run (ms): {'; '.join(parts)}")
    print("\nreference: Taskflow's time, or for resources gpuflow's tasks/s without them.\n"
          "one-shot and steady: Taskflow's time / gpuflow's (>= 1: gpuflow at least as fast); "
          "build: gpuflow's time / Taskflow's.")
    return missed


def main():
    args = parse_args()
    bench = os.environ.get("BENCH", "build-rel/bench/gpuflow_bench")
    taskflow = os.environ.get("TASKFLOW_BENCH")
    if not taskflow:
        sys.exit("vs_taskflow: set TASKFLOW_BENCH to Taskflow's harness (taskflow_bench)")
    workers = os.environ.get("WORKERS", "2")
    repeats = os.environ.get("REPEATS", "5")
    with open(args.out, "w") as out:
        results = measure(args, bench, taskflow, workers, repeats, out)
    missed = report(args, results, workers)
    print(f"raw JSON lines: {args.out}; targets missed: {missed}")
    sys.exit(3 if missed else 0)


if __name__ == "__main__":
    main()
