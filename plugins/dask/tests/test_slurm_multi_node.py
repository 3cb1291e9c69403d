"""A two-node Slurm job on gpuflow: the test's own Slurm (tests/slurm/slurm_cluster.sh, nodes n1
and n2 with two fake GPUs each, each node's slurmd and its jobs with a /tmp of their own, as two
hosts have) runs one batch job over both nodes. The job starts one per-job service per node
(`srun --ntasks-per-node=1 gpuflow serve --per-job`, each at the same path in its node's /tmp)
and `python -m gpuflow.dask worker` per node, one Dask worker per GPU, joining a scheduler in
this process. The seed workload annotated GPU=1 runs on both nodes; each node's service holds
exactly the leases of its own node's workers; `scancel` leaves no process of the job and no
service directory on either node. Skipped, with the reason, where that Slurm cannot start."""
import json
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("distributed")
import dask  # noqa: E402
import dask.array as da  # noqa: E402
from distributed import Client, LocalCluster, get_task_stream  # noqa: E402

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


def wait_until(condition, what, seconds=60):
    deadline = time.monotonic() + seconds  # a hang guard only
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def environ_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            pairs = f.read().split(b"\0")
    except OSError:
        return {}
    return dict(p.decode(errors="replace").split("=", 1) for p in pairs if b"=" in p)


def processes_of_job(job):
    return [int(d) for d in os.listdir("/proc") if d.isdigit()
            and environ_of(d).get("SLURM_JOB_ID") == job]


def node_status(job, node, cli):
    """The job's service on `node`, seen from a step on that node (its /tmp is the node's)."""
    socket = f"/tmp/gpuflow-job-{job}/gpuflow.sock"
    out = subprocess.run(["srun", f"--jobid={job}", "-w", node, "--overlap", "-n1", cli,
                          "status", "--pool", f"unix://{socket}", "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def test_a_two_node_job_runs_a_service_and_dask_workers_per_node(slurm, tmp_path):
    cli = gpuflow_cli(gpuflow.library_path)
    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        script = tmp_path / "two_nodes.sh"
        script.write_text(f"""#!/bin/bash
export TMPDIR=/tmp
srun --ntasks-per-node=1 --overlap {cli} serve --per-job --backend host --emulated-devices 2 \\
  --emulated-device-memory 256M --cpu-workers 1 &
srun --ntasks-per-node=1 --overlap bash -c '
  socket=/tmp/gpuflow-job-$SLURM_JOB_ID/gpuflow.sock
  for i in $(seq 600); do [ -S "$socket" ] && break; sleep 0.1; done
  GPUFLOW_POOL=unix://$socket exec {sys.executable} -m gpuflow.dask worker \\
    {cluster.scheduler_address} --nworkers 2 --name "$SLURMD_NODENAME" --death-timeout 60' &
wait
""")
        submitted = subprocess.run(
            ["sbatch", "--parsable", "-N2", "--ntasks-per-node=1", "--gres=gpu:2",
             "-o", str(tmp_path / "two_nodes.out"), str(script)],
            capture_output=True, text=True, timeout=60)
        assert submitted.returncode == 0, submitted.stderr
        job = submitted.stdout.strip().split(";")[0]
        log = tmp_path / "two_nodes.out"
        try:
            client.wait_for_workers(4, timeout=120)
            info = client.scheduler_info()["workers"]
            names = {address: w["name"] for address, w in info.items()}
            assert sorted(names.values()) == ["n1-gpu0", "n1-gpu1", "n2-gpu0", "n2-gpu1"], names
            with gpuflow.dask.keep_annotations():
                with dask.annotate(resources={"GPU": 1}):
                    total = seed(1000, 250)
                with get_task_stream(client) as stream:
                    value = total.compute()
            assert value == pytest.approx(seed(1000, 250).compute(scheduler="sync"), rel=1e-12)
            ran_on = {names.get(t["worker"], t["worker"]).split("-gpu")[0] for t in stream.data}
            assert ran_on == {"n1", "n2"}, ran_on

            # Each node's service holds its own node's two leases, on its two devices: the
            # services share nothing, although their sockets have the same path.
            for node in ("n1", "n2"):
                status = node_status(job, node, cli)
                leases = status["leases"]
                assert len(leases) == 2, (node, status)
                assert len({lease["devices"][0]["ordinal"] for lease in leases}) == 2, leases
                holders = {environ_of(lease["pid"]).get("SLURMD_NODENAME") for lease in leases}
                assert holders == {node}, (node, leases)
            assert not os.path.exists(f"/tmp/gpuflow-job-{job}"), \
                "a node's service directory is in the test's own /tmp"
        except BaseException:
            print(log.read_text() if log.exists() else "(no job output)")
            raise
        finally:
            subprocess.run(["scancel", job], timeout=60)
        wait_until(lambda: all(j[0] != job for j in jobs()), "the job's end")
        wait_until(lambda: processes_of_job(job) == [], "no process of the job left")
        for node in ("n1", "n2"):
            slurmd = (slurm / f"slurmd-{node}.pid").read_text().strip()
            left = f"/proc/{slurmd}/root/tmp/gpuflow-job-{job}"
            wait_until(lambda: not os.path.exists(left), f"{left} gone", 30)
