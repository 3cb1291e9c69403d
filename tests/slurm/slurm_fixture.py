"""The test's own Slurm (slurm_cluster.sh) for Python tests: munged, slurmctld and two slurmd on
loopback, nodes n1 and n2 with two fake GPUs each, partition `gpuflowtest`. Import with
tests/slurm on sys.path."""
import contextlib
import os
import pathlib
import subprocess

import pytest

HERE = pathlib.Path(__file__).resolve().parent
CLUSTER_SCRIPT = HERE / "slurm_cluster.sh"
LEDGER_CHECK = HERE / "ledger_check.py"


@contextlib.contextmanager
def slurm_cluster(directory: pathlib.Path):
    """Starts the cluster with its files in `directory` and, while it runs, points this process's
    Slurm commands at it (SLURM_CONF; PATH with /usr/sbin; no SLURM_TMPDIR from a Slurm the test
    may run under, so that jobs' sockets go where TMPDIR says). Stops every daemon it started at
    the end. pytest.skip with the reason where it cannot start (not root, Slurm or munge missing,
    a daemon that will not start)."""
    if os.geteuid() != 0:
        pytest.skip("the test's Slurm needs root")
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory.parent, 0o755)
    saved = {name: os.environ.get(name) for name in ("SLURM_CONF", "PATH", "SLURM_TMPDIR")}
    started = subprocess.run(["bash", str(CLUSTER_SCRIPT), "start", str(directory)],
                             capture_output=True, text=True, timeout=120)
    try:
        if started.returncode == 77:
            pytest.skip(started.stdout.strip())
        assert started.returncode == 0, started.stdout + started.stderr
        os.environ["SLURM_CONF"] = str(directory / "slurm.conf")
        os.environ["PATH"] = os.environ.get("PATH", "") + ":/usr/sbin"
        os.environ.pop("SLURM_TMPDIR", None)
        yield directory
    finally:
        subprocess.run(["bash", str(CLUSTER_SCRIPT), "stop", str(directory)], timeout=120)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_job(script, *options, timeout=120):
    """Submits SCRIPT with sbatch OPTIONS and waits for it to end (polling often, where
    `sbatch --wait` sleeps up to 32 s between looks). Returns (completed, how it ended)."""
    submitted = subprocess.run(["sbatch", "--parsable", *options, str(script)],
                               capture_output=True, text=True, timeout=60)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip().split(";")[0]
    directory = pathlib.Path(os.environ["SLURM_CONF"]).parent
    done = subprocess.run(["bash", str(CLUSTER_SCRIPT), "wait", str(directory), job,
                           str(int(timeout))], capture_output=True, text=True,
                          timeout=timeout + 30)
    return done.returncode == 0, f"job {job}: " + done.stdout.strip()


def jobs() -> list:
    """The cluster's jobs as [job id, node list, state]."""
    out = subprocess.run(["squeue", "-h", "-o", "%i %N %T"], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    return [line.split() for line in out.splitlines() if line.strip()]


def gpuflow_cli(library_path: str) -> str:
    """The gpuflow command of the build the library comes from (skips when there is none)."""
    lib = os.path.realpath(library_path)
    cli = os.path.join(os.path.dirname(os.path.dirname(lib)), "tools", "gpuflow", "gpuflow")
    if not os.access(cli, os.X_OK):
        pytest.skip(f"no gpuflow command next to {lib}")
    return cli
