"""Helpers for the executor tests: the service's ledger, and the real `snakemake` command (from
this interpreter's environment) run in a tmp dir. (A module of its own, not conftest.py: test
directories share one import namespace when pytest runs several suites at once.)"""
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import gpuflow

PLUGIN_SRC = pathlib.Path(__file__).resolve().parents[1] / "src"
DEVICES = 3


def status(endpoint: str) -> dict:
    with gpuflow.Pool(endpoint=endpoint, cpu_workers=1) as pool:
        return pool.service_status()


def leases_left(endpoint: str, within: float = 60.0) -> list:
    """The service's leases and queued requests once they are gone, or what is left after
    `within` seconds (a guard against a hang: on a loaded machine, "a moment" may be long). A
    `gpuflow lease` process releases before it exits, but the service learns of a dead one's
    closed connection on its own loop: a moment later."""
    deadline = time.monotonic() + within
    while True:
        st = status(endpoint)
        left = st["leases"] + st["queued"]
        busy = [d for d in st["devices"] if d["share_in_use"] or d["memory_in_use"]]
        if (not left and not busy) or time.monotonic() > deadline:
            return left + busy
        time.sleep(0.05)


def snakemake_env() -> dict:
    """The environment for a snakemake child: this checkout's gpuflow package and plugin first
    on PYTHONPATH (whatever is installed in the venv), no inherited service or devices."""
    env = dict(os.environ)
    paths = [str(PLUGIN_SRC), os.path.dirname(os.path.dirname(gpuflow.__file__))]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["GPUFLOW_LIBRARY"] = os.path.realpath(gpuflow.library_path)
    for name in ("GPUFLOW_POOL", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
        env.pop(name, None)
    return env


def write_workflow(workdir: pathlib.Path, snakefile: str):
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "Snakefile").write_text(textwrap.dedent(snakefile))


# `python -m snakemake`, with SIGINT handled as Python does by default: a process started from a
# non-interactive shell's background job inherits SIGINT ignored, and Python keeps it ignored,
# which would make the Ctrl-C test depend on how pytest was started.
SNAKEMAKE_MAIN = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                  "sys.argv[0] = 'snakemake'; from snakemake.cli import main; main()")


def snakemake_command(*args) -> list:
    return [sys.executable, "-c", SNAKEMAKE_MAIN, "--executor", "gpuflow", "--nolock",
            "--show-failed-logs", *args]


def run_snakemake(workdir: pathlib.Path, *args, timeout: float = 120):
    """Runs snakemake to its end; returns (exit status, stdout and stderr together)."""
    proc = subprocess.run(snakemake_command(*args), cwd=workdir, env=snakemake_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)
    return proc.returncode, proc.stdout


def start_snakemake(workdir: pathlib.Path, *args, log: pathlib.Path) -> subprocess.Popen:
    return subprocess.Popen(snakemake_command(*args), cwd=workdir, env=snakemake_env(),
                            stdout=open(log, "w"), stderr=subprocess.STDOUT)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes (its parent has not reaped it yet).
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def interrupt(proc: subprocess.Popen, timeout: float = 30) -> int:
    proc.send_signal(signal.SIGINT)
    return proc.wait(timeout=timeout)
