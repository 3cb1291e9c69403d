"""Dask on Slurm through gpuflow: dask-jobqueue's SLURMCluster submits two
batch jobs to a Slurm of the test's own (tests/slurm/slurm_cluster.sh: munged, slurmctld and two
slurmd on loopback, nodes n1 and n2 with two fake GPUs each), each job starting its own gpuflow
pool (`gpuflow serve --per-job --daemon`, the job script's prologue) and then
`python -m gpuflow.dask worker` (gpuflow-dask-worker) in place of dask-worker: one Dask worker per
GPU, each on a device leased from its own job's pool. The seed workload annotated GPU=1 runs from
this process; its sum is checked, its tasks ran in both jobs, the jobs ran on both nodes, and once
the cluster closes both jobs and their pools are gone. Skipped, with the reason, where that Slurm
cannot start (not root, Slurm or munge missing, a daemon that will not start)."""
import json
import os
import subprocess
import sys
import time

import signal

import pytest

pytest.importorskip("distributed")
# dask_jobqueue's runner module sets its own SIGINT handler (sys.exit) when imported, which
# would turn every later test's Ctrl-C into SystemExit: the session's handler is put back.
_session_sigint = signal.getsignal(signal.SIGINT)
jobqueue = pytest.importorskip("dask_jobqueue")
signal.signal(signal.SIGINT, _session_sigint)

import dask  # noqa: E402
import dask.array as da  # noqa: E402
from distributed import Client, get_task_stream  # noqa: E402

import gpuflow  # noqa: E402
import gpuflow.dask  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tests", "slurm"))
from slurm_fixture import gpuflow_cli, jobs, slurm_cluster  # noqa: E402


@pytest.fixture
def slurm(tmp_path):
    with slurm_cluster(tmp_path / "cluster") as cluster:
        yield cluster


def seed(n, c):
    x = da.random.RandomState(42).normal(10, 1, size=(n, n), chunks=(c, c))
    return (x + 1)[::2, ::2].sum()


def test_slurmcluster_workers_lease_from_their_jobs_pools(slurm, tmp_path):
    cli = gpuflow_cli(gpuflow.library_path)
    jobtmp = tmp_path / "jobtmp"
    jobtmp.mkdir(mode=0o700)
    prologue = [
        f"export TMPDIR={jobtmp}",
        # The job's own pool on the job's two GPUs (emulated here).
        f'eval "$({cli} serve --per-job --daemon --backend host --emulated-devices 2 '
        '--emulated-device-memory 256M --cpu-workers 1)"',
    ]
    cluster = jobqueue.SLURMCluster(
        cores=2, processes=1, memory="900MB", walltime="00:05:00", queue="gpuflowtest",
        python=sys.executable, worker_command="gpuflow.dask worker",
        job_script_prologue=prologue, job_extra_directives=["--gres=gpu:2", "-N1"],
        scheduler_options={"host": "127.0.0.1", "dashboard_address": ":0"},
        log_directory=str(tmp_path / "logs"), death_timeout=60)
    try:
        with Client(cluster, timeout=60) as client:
            cluster.scale(jobs=2)
            client.wait_for_workers(4, timeout=120)
            info = client.scheduler_info()["workers"]
            names = {address: w["name"] for address, w in info.items()}
            assert all(w["resources"].get("GPU") == 1 for w in info.values()), info
            env = client.run(lambda: {k: os.environ.get(k) for k in (
                "CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID")})
            with gpuflow.dask.keep_annotations():
                with dask.annotate(resources={"GPU": 1}):
                    total = seed(1000, 250)
                with get_task_stream(client) as stream:
                    value = total.compute()
            expected = seed(1000, 250).compute(scheduler="sync")
            assert value == pytest.approx(expected, rel=1e-12)
            ran_on = {names.get(t["worker"], t["worker"]) for t in stream.data}
            running = jobs()
            by_job = {}
            for address, e in env.items():
                by_job.setdefault(e["SLURM_JOB_ID"], []).append(e["CUDA_VISIBLE_DEVICES"])
            # Two jobs, one per node, each of whose two workers leased one of its job's devices
            # from its job's pool (the worker's own pool is then embedded on that device).
            assert len(running) == 2 and {n for _, n, _ in running} == {"n1", "n2"}, running
            assert sorted(by_job) == sorted(job for job, _, _ in running), by_job
            for job, devices in by_job.items():
                pool = f"unix://{jobtmp}/gpuflow-job-{job}/gpuflow.sock"
                status = json.loads(subprocess.run(
                    [cli, "status", "--pool", pool, "--json"], capture_output=True, text=True,
                    timeout=30, check=True).stdout)
                leased = sorted(lease["devices"][0]["uuid"] for lease in status["leases"])
                assert len(leased) == 2 and leased == sorted(devices), (job, status, devices)
            prefixes = {name.rsplit("-gpu", 1)[0] for name in ran_on}
            assert len(prefixes) == 2, f"the tasks ran in one job only: {ran_on}"
    finally:
        cluster.close()
    # Closing the cluster cancels the jobs: their pools stop with them.
    deadline = time.monotonic() + 30
    while jobs() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert jobs() == []
    deadline = time.monotonic() + 10
    while list(jobtmp.glob("gpuflow-job-*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(jobtmp.glob("gpuflow-job-*")) == [], "a job's pool outlived its job"
