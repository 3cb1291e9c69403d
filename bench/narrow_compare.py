#!/usr/bin/env python3
"""Narrow dependent graphs with real work: gpuflow against OpenMP (and StarPU), in one run.

    bench/narrow_compare.py [--bin-dir build-rel/bench] [--graphs stencil,neighbour,tree]
        [--work-us 1,2,3,...] [--workers 2] [--rounds 3] [--repeats 3] [--out FILE]
        [--peers gpuflow,openmp,starpu] [--gpuflow-lib DIR]

Runs narrow_bench (gpuflow), narrow_omp (OpenMP) and narrow_starpu (StarPU; each peer whose
binary is missing from --bin-dir is left out, with a note) on each graph at each task size U
(--work-us, microseconds of work per task). Every round runs each graph at each U on every
peer, one process per point, the peers' order reversed every other round, so that whatever
else loads the machine weighs on every peer alike.

The graph's size is chosen per U so that one timed run would take about 0.2 s if every worker
were busy all the time: stencil and neighbour get S = 0.2 s x workers / (width x U) steps,
clamped to 1,000..20,000, tree the power of two nearest to 0.2 s x workers / (2 U) leaves,
clamped to 1,024..65,536. Where the floor applies (stencil at 200 us, neighbour from 100 us) a
run would take up to 0.4 s; where the ceiling applies (below 10 us) less than 0.2 s, and then
the scheduler's overhead decides how long it takes. One point (a warm-up and --repeats timed
runs of one peer) is thus about a second.

Prints a table per graph: U, the steps or leaves, each peer's share of ideal (the work, tasks x
U, over the median elapsed time of all its timed runs at that U times the workers), and each
peer's median wait from a task's last input being done to its start; then, per peer, the
smallest U whose share is >= 0.5 (linearly interpolated between sweep points; the first
crossing), and whether the share is >= 0.95 at every U from 100 us up. Then the targets the
scheduler is judged on, with 2 workers: gpuflow's crossover <= OpenMP's in the same run, and
gpuflow >= 0.95 of ideal from 100 us up. Exit status 3 when a target is missed, 1 when a peer
failed (its message is printed), 0 otherwise. --out FILE gets every JSON line the peers printed.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

PEERS = {"gpuflow": "narrow_bench", "openmp": "narrow_omp", "starpu": "narrow_starpu"}
DEFAULT_WORK_US = "1,2,3,5,7,10,15,20,34,50,75,100,150,200"
TARGET_RUN_S = 0.2  # the ideal time of one timed run
HALF = 0.5
FULL = 0.95
FULL_FROM_US = 100


def graph_size(graph, work_us, workers):
    """The size options of one point: see the docstring."""
    if graph == "tree":
        leaves = TARGET_RUN_S * workers / (2 * work_us * 1e-6)
        leaves = 2 ** round(math.log2(max(leaves, 1)))
        return ["--leaves", str(min(max(leaves, 1024), 65536))]
    width = workers if graph == "stencil" else 2 * workers
    steps = round(TARGET_RUN_S * workers / (width * work_us * 1e-6))
    return ["--width", str(width), "--steps", str(min(max(steps, 1000), 20000))]


def run_point(binary, env, graph, work_us, args):
    cmd = [binary, graph, "--work-us", f"{work_us:g}", "--workers", str(args.workers),
           "--repeats", str(args.repeats)] + graph_size(graph, work_us, args.workers)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(f"narrow_compare: {' '.join(cmd)} exited {done.returncode}\n")
        sys.stderr.write(done.stderr)
        sys.exit(1)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def crossover(points):
    """The smallest U whose share reaches HALF, interpolated: (U, text)."""
    for i, (us, share) in enumerate(points):
        if share >= HALF:
            if i == 0:
                return us, f"<= {us:g} us"
            us0, share0 = points[i - 1]
            at = us0 + (HALF - share0) * (us - us0) / (share - share0)
            return at, f"{at:.1f} us"
    return math.inf, f"> {points[-1][0]:g} us"


def full_from(points):
    """(whether every share from FULL_FROM_US up is >= FULL, the lowest of them); (None, None)
    when the sweep has no such U."""
    shares = [share for us, share in points if us >= FULL_FROM_US]
    if not shares:
        return None, None
    return min(shares) >= FULL, min(shares)


def print_table(graph, peers, work_us, lines, args):
    """Prints one graph's table; returns each peer's [(U, share)]."""
    def of(peer, us):
        return [line for line in lines if line["peer"] == peer and line["work_us"] == us]

    first = of(peers[0], work_us[0])[0]
    shape = "" if graph == "tree" else f", width {first['width']}"
    print(f"\n{graph}{shape}, {args.workers} workers: share of ideal (median of "
          f"{args.rounds} rounds x {args.repeats} runs) | median us from last input to start")
    size_name = "leaves" if graph == "tree" else "steps"
    print(f"{'U us':>6} {size_name:>7} " + " ".join(f"{p:>8}" for p in peers) + "  | "
          + " ".join(f"{p:>8}" for p in peers))
    curves = {peer: [] for peer in peers}
    for us in work_us:
        shares, waits = [], []
        for peer in peers:
            found = of(peer, us)
            times = [t for line in found for t in line["times_s"]]
            share = found[0]["work_s"] / (statistics.median(times) * args.workers)
            curves[peer].append((us, share))
            shares.append(f"{share:8.3f}")
            wait = statistics.median(line["ready_to_start_us_median"] for line in found)
            waits.append(f"{wait:8.1f}")
        size = of(peers[0], us)[0][size_name]
        print(f"{us:>6g} {size:>7} " + " ".join(shares) + "  | " + " ".join(waits))
    return curves


def print_verdicts(graph, curves, args):
    """Prints each peer's crossover and full-share verdict, then the targets; returns those
    missed."""
    crossovers = {peer: crossover(points) for peer, points in curves.items()}
    fulls = {peer: full_from(points) for peer, points in curves.items()}
    print(f"50 % crossover (share >= {HALF}, first crossing, interpolated): "
          + ", ".join(f"{peer} {text}" for peer, (_, text) in crossovers.items()))
    print(f"share >= {FULL} from {FULL_FROM_US} us up: " + ", ".join(
        f"{peer} no U >= {FULL_FROM_US} in the sweep" if ok is None
        else f"{peer} {'yes' if ok else 'no'} (lowest {low:.3f})"
        for peer, (ok, low) in fulls.items()))
    if "gpuflow" not in curves:
        return []
    missed = []
    if "openmp" in curves:
        ours, theirs = crossovers["gpuflow"][0], crossovers["openmp"][0]
        # Neither reaching half of the machine within the sweep says nothing of which is first.
        ok = None if ours == theirs == math.inf else ours <= theirs
        print("target: gpuflow's crossover <= openmp's: "
              + ("not judged" if ok is None else "met" if ok else "MISSED")
              + f" ({crossovers['gpuflow'][1]} vs {crossovers['openmp'][1]})")
        if ok is False:
            missed.append(f"{graph}: crossover")
    ok = fulls["gpuflow"][0]
    print(f"target: gpuflow >= {FULL} of ideal from {FULL_FROM_US} us up: "
          + ("not judged" if ok is None else "met" if ok else "MISSED"))
    if ok is False:
        missed.append(f"{graph}: {FULL} from {FULL_FROM_US} us")
    if args.workers != 2:
        print(f"(the targets are set for 2 workers; this run has {args.workers})")
    return missed


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", default="build-rel/bench")
    parser.add_argument("--graphs", default="stencil,neighbour,tree")
    parser.add_argument("--work-us", default=DEFAULT_WORK_US)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--gpuflow-lib", help="a directory holding the libgpuflow.so.0 to "
                        "measure (LD_LIBRARY_PATH of narrow_bench only)")
    parser.add_argument("--out", help="write every JSON line here")
    args = parser.parse_args()
    graphs = args.graphs.split(",")
    work_us = sorted(float(u) for u in args.work_us.split(","))
    for graph in graphs:
        if graph not in ("stencil", "neighbour", "tree"):
            parser.error(f"unknown graph {graph}")
    peers, binaries = [], {}
    for peer in args.peers.split(","):
        if peer not in PEERS:
            parser.error(f"unknown peer {peer}")
        path = os.path.join(args.bin_dir, PEERS[peer])
        if os.access(path, os.X_OK):
            peers.append(peer)
            binaries[peer] = path
        else:
            print(f"narrow_compare: no {path}: {peer} left out", file=sys.stderr)
    if not peers:
        sys.exit("narrow_compare: no peer to run")
    envs = {peer: dict(os.environ) for peer in peers}
    if args.gpuflow_lib and "gpuflow" in envs:
        envs["gpuflow"]["LD_LIBRARY_PATH"] = args.gpuflow_lib
    if "starpu" in envs:
        envs["starpu"].setdefault("STARPU_SILENT", "1")

    lines = []
    for r in range(args.rounds):
        order = peers if r % 2 == 0 else peers[::-1]
        for graph in graphs:
            for us in work_us:
                for peer in order:
                    lines += run_point(binaries[peer], envs[peer], graph, us, args)
        print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)
    if args.out:
        with open(args.out, "w") as out:
            for line in lines:
                out.write(json.dumps(line) + "\n")
    missed = []
    for graph in graphs:
        curves = print_table(graph, peers, work_us,
                             [line for line in lines if line["graph"] == graph], args)
        missed += print_verdicts(graph, curves, args)
    if missed:
        print("\ntargets missed: " + "; ".join(missed))
        sys.exit(3)


if __name__ == "__main__":
    main()
