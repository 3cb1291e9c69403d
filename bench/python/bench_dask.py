#!/usr/bin/env python3
"""Dask schedulers side by side: Dask's 'sync' and 'threads' (2 workers) and gpuflow.dask.get
(a gpuflow pool of 2 CPU workers), on the scheduler-overhead graphs and the seed workload.

    .venv/bin/python bench/python/bench_dask.py                # full run (~10 min on 2 cores)
    .venv/bin/python bench/python/bench_dask.py --quick        # small sizes, ~1 min
    options: --repeats N (graphs, default 5), --seed-repeats N (default 3), --seed-size N,C,
             --only wide,chain,tree,seed   --out FILE.jsonl   --markdown FILE.md

Graphs (the same as ../../../shared/bench/dask_graphs.py, Dask's peer benchmark):
  wide  N independent no-op tasks (N = 100,000)
  chain N tasks, task i consumes task i-1 (N = 10,000; result checked)
  tree  N leaves summed pairwise (N = 65,536 leaves, 131,071 tasks; result checked)
Timed region: scheduler call on the graph dict (graph construction timed separately).
Seed workload: x = RandomState().normal(10, 1, (N, N), chunks=(C, C)); (x + 1)[::2, ::2].sum()
with N = 20,000, C = 2,000; timed region = build the array + compute.
Every (peer, benchmark) runs in its own process after an untimed warm-up; medians are reported.
Each process prints one JSON line; the driver prints a table with ratios.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from operator import add

PEERS = ("sync", "threads", "gpuflow")
SIZES = {"wide": 100_000, "chain": 10_000, "tree": 65_536}
QUICK = {"wide": 5_000, "chain": 1_000, "tree": 2_048}
SEED, SEED_QUICK = (20_000, 2_000), (4_000, 1_000)


def noop():
    return None


def one():
    return 1


def inc(x):
    return x + 1


def build(graph, n, p):
    if graph == "wide":
        dsk = {(p, i): (noop,) for i in range(n)}
        return dsk, list(dsk), None
    if graph == "chain":
        dsk = {(p, 0): (one,)}
        for i in range(1, n):
            dsk[(p, i)] = (inc, (p, i - 1))
        return dsk, [(p, n - 1)], n
    if graph == "tree":
        assert n & (n - 1) == 0, "tree needs a power-of-two leaf count"
        dsk = {(p, 0, i): (one,) for i in range(n)}
        lvl, width = 0, n
        while width > 1:
            for i in range(width // 2):
                dsk[(p, lvl + 1, i)] = (add, (p, lvl, 2 * i), (p, lvl, 2 * i + 1))
            lvl, width = lvl + 1, width // 2
        return dsk, [(p, lvl, 0)], n
    raise SystemExit("unknown graph " + graph)


def scheduler(peer):
    """(get function for graph dicts, kwargs for .compute())"""
    if peer == "sync":
        import dask.local
        return dask.local.get_sync, {"scheduler": "sync"}
    if peer == "threads":
        import dask.threaded
        return (lambda dsk, keys: dask.threaded.get(dsk, keys, num_workers=2),
                {"scheduler": "threads", "num_workers": 2})
    if peer == "gpuflow":
        import gpuflow
        import gpuflow.dask
        pool = gpuflow.Pool(cpu_workers=2)
        gpuflow.dask.set_default_pool(pool)
        return (lambda dsk, keys: gpuflow.dask.get(dsk, keys, pool=pool),
                {"scheduler": gpuflow.dask.get, "pool": pool})
    raise SystemExit("unknown peer " + peer)


def one_graph(peer, graph, n, repeats):
    get, _ = scheduler(peer)

    def once(n):
        p = "k" + uuid.uuid4().hex[:8]
        t0 = time.perf_counter()
        dsk, keys, expected = build(graph, n, p)
        t1 = time.perf_counter()
        res = get(dsk, keys)
        t2 = time.perf_counter()
        if expected is not None:
            assert res[0] == expected, res[0]
        return t1 - t0, t2 - t1

    once(min(n, 256))
    builds, times = [], []
    for _ in range(repeats):
        b, t = once(n)
        builds.append(b)
        times.append(t)
    ntasks = 2 * n - 1 if graph == "tree" else n
    med = statistics.median(times)
    return {"peer": peer, "bench": graph, "n": n, "tasks": ntasks, "repeats": repeats,
            "times_s": [round(t, 4) for t in times], "median_s": round(med, 4),
            "build_median_s": round(statistics.median(builds), 4),
            "tasks_per_s": round(ntasks / med), "us_per_task": round(med / ntasks * 1e6, 2)}


def one_seed(peer, n, c, repeats):
    import dask.array as da
    _, kw = scheduler(peer)

    def once(n):
        rs = da.random.RandomState()
        x = rs.normal(10, 1, size=(n, n), chunks=(c, c))
        return (x + 1)[::2, ::2].sum().compute(**kw)

    once(2 * c)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = float(once(n))
        times.append(time.perf_counter() - t0)
        expected = 11.0 * (n // 2) ** 2
        assert abs(r / expected - 1) < 1e-3, r
    med = statistics.median(times)
    return {"peer": peer, "bench": "seed", "n": n, "chunk": c, "tasks": None, "repeats": repeats,
            "times_s": [round(t, 3) for t in times], "median_s": round(med, 3)}


def versions():
    import dask
    import numpy
    out = {"python": platform.python_version(), "dask": dask.__version__,
           "numpy": numpy.__version__, "cpus": os.cpu_count(), "machine": platform.machine()}
    try:
        import gpuflow
        out["gpuflow"] = gpuflow.version()
    except Exception as e:  # noqa: BLE001
        out["gpuflow"] = f"unavailable: {e}"
    return out


def table(results, env, cmd):
    rows = {}
    for r in results:
        rows.setdefault(r["bench"], {})[r["peer"]] = r
    lines = [f"Date: {env['date']}; command: `{cmd}`",
             f"Machine: {env['cpus']} CPUs ({env['machine']}); Python {env['python']}, "
             f"Dask {env['dask']}, numpy {env['numpy']}, gpuflow {env['gpuflow']}", "",
             "| benchmark | tasks | dask sync (s) | dask threads (s) | gpuflow (s) | "
             "gpuflow µs/task | speed-up vs threads | speed-up vs sync |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for bench in ("wide", "chain", "tree", "seed"):
        peers = rows.get(bench)
        if not peers:
            continue
        s, t, g = (peers.get(p, {}).get("median_s") for p in PEERS)
        any_r = next(iter(peers.values()))
        label = f"{bench} ({any_r['n']}" + (f", chunks {any_r['chunk']})" if bench == "seed"
                                            else ")")
        us = peers.get("gpuflow", {}).get("us_per_task", "")
        ratio = lambda a, b: f"{a / b:.2f}×" if a and b else "n/a"  # noqa: E731
        lines.append(f"| {label} | {any_r['tasks'] or ''} | {s} | {t} | {g} | {us} | "
                     f"{ratio(t, g)} | {ratio(s, g)} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed-repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1,
                    help="interleave the peers this many times (one process per peer and "
                         "round); medians are taken over every round's repeats, so that a "
                         "machine whose load drifts does not favour one peer")
    ap.add_argument("--seed-size", metavar="N,C", help="the seed workload's N and C "
                    "(default 20000,2000; --quick 4000,1000)")
    ap.add_argument("--only", default="wide,chain,tree,seed")
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--out", help="append the JSON lines to this file")
    ap.add_argument("--markdown", help="write the table to this file")
    ap.add_argument("--one", nargs="+", help=argparse.SUPPRESS)  # PEER BENCH N [C] REPEATS
    a = ap.parse_args()
    if a.one:
        peer, bench = a.one[0], a.one[1]
        if bench == "seed":
            r = one_seed(peer, int(a.one[2]), int(a.one[3]), int(a.one[4]))
        else:
            r = one_graph(peer, bench, int(a.one[2]), int(a.one[3]))
        print(json.dumps(r), flush=True)
        return
    sizes = QUICK if a.quick else SIZES
    seed = SEED_QUICK if a.quick else SEED
    if a.seed_size:
        seed = tuple(int(v) for v in a.seed_size.split(","))
    env = versions()
    env["date"] = datetime.datetime.now().isoformat(timespec="seconds")
    cmd = " ".join(["bench/python/bench_dask.py"] + sys.argv[1:])
    results = []
    for bench in a.only.split(","):
        merged = {}
        for _ in range(a.rounds):
            for peer in a.peers.split(","):
                if bench == "seed":
                    args = [peer, "seed", str(seed[0]), str(seed[1]), str(a.seed_repeats)]
                else:
                    args = [peer, bench, str(sizes[bench]), str(a.repeats)]
                p = subprocess.run([sys.executable, __file__, "--one", *args],
                                   capture_output=True, text=True)
                if p.returncode != 0:
                    sys.stderr.write(p.stdout + p.stderr)
                    raise SystemExit(f"{peer} {bench} failed (exit {p.returncode})")
                r = json.loads(p.stdout.strip().splitlines()[-1])
                print(json.dumps(r), file=sys.stderr, flush=True)
                if peer in merged:
                    merged[peer]["times_s"] += r["times_s"]
                else:
                    merged[peer] = r
        for peer, r in merged.items():
            med = statistics.median(r["times_s"])
            r["repeats"] = len(r["times_s"])
            r["median_s"] = round(med, 4)
            if r.get("tasks"):
                r["tasks_per_s"] = round(r["tasks"] / med)
                r["us_per_task"] = round(med / r["tasks"] * 1e6, 2)
            results.append(r)
            if a.out:
                with open(a.out, "a") as f:
                    f.write(json.dumps({**r, **env}) + "\n")
    md = table(results, env, cmd)
    print(md)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(md + "\n")


if __name__ == "__main__":
    main()
