#!/usr/bin/env python3
"""Snakemake's per-job overhead: its local executor against the gpuflow executor
(plugins/snakemake), on N trivial jobs (`touch {output}`), in one run, variants interleaved.

    .venv/bin/python bench/python/bench_snakemake.py     # 50 jobs, 3 rounds (~10 min on 2 cores)
    options: --jobs N (default 50)  --rounds R (default 3)  --cores C (default 2)
             --variants local,local-run,gpuflow-cpu,gpuflow-gpu (default: all but local-run)
             --out FILE.jsonl  --markdown FILE.md

Variants (the same Snakefile; `resources: gpu=config["gpu"]`):
  local        --executor local (gpu=1 is only counted by Snakemake; no device is chosen)
  local-run    --executor local with `run: shell(...)` instead of `shell:`: the local executor
               then gives each job a Snakemake process of its own, as the gpuflow executor does
  gpuflow-cpu  --executor gpuflow, gpu=0: no lease, Snakemake's per-job process only
  gpuflow-gpu  --executor gpuflow, gpu=1: every job under a lease from a service with C
               emulated devices (so leases never limit parallelism below --cores C)
Timed region: the whole `snakemake` command in a fresh directory (start-up, DAG, N jobs, end).
Per-job figures divide by N; "extra per job" is (variant - local) / N. Medians over the rounds.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import gpuflow

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VARIANTS = ("local", "local-run", "gpuflow-cpu", "gpuflow-gpu")
DEFAULT_VARIANTS = ("local", "gpuflow-cpu", "gpuflow-gpu")

SNAKEFILE = """
rule all:
    input: expand("out/{i}.txt", i=range(config["jobs"]))

if config.get("action") == "run":
    rule job:
        output: "out/{i}.txt"
        resources: gpu=config["gpu"]
        run: shell("touch {output}")
else:
    rule job:
        output: "out/{i}.txt"
        resources: gpu=config["gpu"]
        shell: "touch {output}"
"""


def run_once(variant, jobs, cores, endpoint, scratch):
    workdir = pathlib.Path(tempfile.mkdtemp(prefix=f"{variant}-", dir=scratch))
    (workdir / "Snakefile").write_text(SNAKEFILE)
    gpu = 0 if variant == "gpuflow-cpu" else 1
    action = "run" if variant == "local-run" else "shell"
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), "--nolock", "--quiet",
           "all", "--config", f"jobs={jobs}", f"gpu={gpu}", f"action={action}"]
    if variant.startswith("local"):
        cmd += ["--executor", "local"]
    else:
        cmd += ["--executor", "gpuflow", "--gpuflow-endpoint", endpoint]
    env = dict(os.environ)
    # This checkout's plugin and binding, installed or not.
    paths = [str(ROOT / "plugins" / "snakemake" / "src"),
             os.path.dirname(os.path.dirname(gpuflow.__file__))]
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                                 else []))
    env.pop("GPUFLOW_POOL", None)
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"bench_snakemake: {variant} failed:\n{proc.stdout}")
    done = len(list((workdir / "out").glob("*.txt")))
    if done != jobs:
        sys.exit(f"bench_snakemake: {variant} made {done} outputs, not {jobs}")
    return seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS))
    ap.add_argument("--out")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    variants = args.variants.split(",")
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        ap.error(f"unknown variants {sorted(unknown)}; known: {', '.join(VARIANTS)}")

    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    times = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="bench-snakemake-") as scratch:
        service = gpuflow.Service(socket_path=os.path.join(scratch, "gf.sock"), backend="host",
                                  emulated_devices=args.cores, device_memory=64 << 20,
                                  cpu_workers=os.cpu_count() or 1,
                                  **({"log": _drop} if _service_takes_log() else {}))
        out = open(args.out, "a") if args.out else None
        try:
            for r in range(args.rounds):
                # Interleaved, and the order rotates, so that load drifts hit every variant.
                order = variants[r % len(variants):] + variants[:r % len(variants)]
                for v in order:
                    seconds = run_once(v, args.jobs, args.cores, service.endpoint, scratch)
                    times[v].append(seconds)
                    record = {"bench": "snakemake", "variant": v, "round": r, "jobs": args.jobs,
                              "cores": args.cores, "seconds": round(seconds, 4), "date": when}
                    print(json.dumps(record), flush=True)
                    if out:
                        print(json.dumps(record), file=out, flush=True)
            with gpuflow.Pool(endpoint=service.endpoint, cpu_workers=1) as pool:
                left = pool.service_status()["leases"]
            if left:
                sys.exit(f"bench_snakemake: leases left on the service: {left}")
        finally:
            if out:
                out.close()
            service.stop()

    local = statistics.median(times["local"]) if "local" in times else None
    command = " ".join(["bench/python/bench_snakemake.py"] + sys.argv[1:])
    lines = [f"Date: {when}; command: `{command}`",
             f"Machine: {os.cpu_count()} CPUs ({platform.machine()}), load average "
             f"{os.getloadavg()[0]:.1f} at the end; Python {platform.python_version()}, "
             f"Snakemake {_version('snakemake')}, gpuflow {gpuflow.__version__}",
             "",
             f"| variant | {args.jobs} jobs, median (s) | runs (s) | per job (ms) "
             "| extra per job vs local (ms) |",
             "| --- | --- | --- | --- | --- |"]
    for v in variants:
        med = statistics.median(times[v])
        extra = f"{(med - local) / args.jobs * 1000:.0f}" if local is not None and v != "local" \
            else ""
        runs = " ".join(f"{t:.2f}" for t in times[v])
        lines.append(f"| {v} | {med:.2f} | {runs} | {med / args.jobs * 1000:.0f} | {extra} |")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(text + "\n")


def _drop(line):
    pass  # the service's per-lease log lines are not part of what is measured


def _service_takes_log():
    import inspect
    return "log" in inspect.signature(gpuflow.Service).parameters


def _version(name):
    from importlib.metadata import version
    return version(name)


if __name__ == "__main__":
    main()
