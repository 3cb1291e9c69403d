"""Dask distributed on gpuflow, on one machine: LocalGPUCluster's workers run on devices leased
from the node's service (distinct devices, never one another holds), advertise GPU and
gpu_memory, honour dask.annotate(resources=...) after optimisation, and hand the devices back;
the worker command (python -m gpuflow.dask worker) does the same for another node's workers,
and a killed worker's devices are back in the ledger while its computation is still unfinished,
which Dask then completes."""
import os
import signal
import subprocess
import sys
import time

import dask
import dask.array as da
import pytest

distributed = pytest.importorskip("distributed")
from distributed import Client, LocalCluster  # noqa: E402

import gpuflow  # noqa: E402
import gpuflow.dask  # noqa: E402
from gpuflow.dask import LocalGPUCluster  # noqa: E402
from waiting import wait_until  # noqa: E402

SERVICE = dict(backend="host", emulated_devices=3, device_memory=256 << 20, cpu_workers=2)


@pytest.fixture
def service(tmp_path):
    with gpuflow.Service(socket_path=str(tmp_path / "gf.sock"), log=False, **SERVICE) as s:
        yield s


def leases_of(endpoint):
    with gpuflow.Pool(endpoint=endpoint, cpu_workers=1) as watcher:
        return watcher.service_status()["leases"]


def seed(n, c):
    x = da.random.RandomState(42).normal(10, 1, size=(n, n), chunks=(c, c))
    return (x + 1)[::2, ::2].sum()


def seed_expected(n, c):
    return seed(n, c).compute(scheduler="sync")


def test_a_workers_environment_is_its_leases_with_an_embedded_pool(service):
    # 256 MiB devices: a whole one is what an emulated pool in the worker gets.
    with gpuflow.Pool(endpoint=service.endpoint, cpu_workers=1) as pool:
        with pool.lease(gpus=1, devices=[2]) as lease:
            env = gpuflow.dask.lease_environment(lease, device_memory_limit=1 << 20,
                                                 spill_threshold=0.5)
            assert env == {**lease.environment, "GPUFLOW_POOL": "embedded",
                           "GPUFLOW_DEVICE_MEMORY_LIMIT": str(1 << 20),
                           "GPUFLOW_SPILL_THRESHOLD": "0.5"}
            assert env["CUDA_VISIBLE_DEVICES"] == lease.devices[0].uuid
            assert env["GPUFLOW_DEVICES"] == "2" and env["GPUFLOW_EMULATED_DEVICES"] == "3"
            assert env["GPUFLOW_EMULATED_DEVICE_MEMORY"] == str(256 << 20)
            assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in env  # a whole device


def test_workers_get_distinct_leased_devices_and_give_them_back(service):
    with gpuflow.Pool(endpoint=service.endpoint, cpu_workers=1) as other:
        held = other.lease(gpus=1, name="someone else")  # e.g. a Snakemake job on the node
        with LocalGPUCluster(endpoint=service.endpoint, n_workers=2,
                             device_memory_limit=128 << 20) as cluster, Client(cluster) as client:
            env = client.run(lambda: {k: os.environ.get(k) for k in (
                "CUDA_VISIBLE_DEVICES", "GPUFLOW_DEVICES", "GPUFLOW_POOL",
                "GPUFLOW_DEVICE_MEMORY_LIMIT")})
            devices = [e["CUDA_VISIBLE_DEVICES"] for e in env.values()]
            assert len(set(devices)) == 2, devices
            assert held.cuda_visible_devices not in devices, "a worker got a held device"
            assert all(e["GPUFLOW_POOL"] == "embedded" for e in env.values())
            assert all(e["GPUFLOW_DEVICE_MEMORY_LIMIT"] == str(128 << 20) for e in env.values())
            info = client.scheduler_info()["workers"]
            for w in info.values():
                assert w["resources"]["GPU"] == 1
                assert w["resources"]["gpu_memory"] == 256 << 20
            names = sorted(entry["name"] for entry in leases_of(service.endpoint))
            assert names == ["dask worker 0", "dask worker 1", "someone else"], names

            # A gpuflow pool made inside a worker runs on what the worker leased.
            def pool_in_worker():
                with gpuflow.Pool(cpu_workers=1) as pool:
                    return [w.kind for w in pool.workers()].count("gpu"), \
                        pool.device_memory(0).capacity

            assert set(client.run(pool_in_worker).values()) == {(1, 128 << 20)}
        assert [entry["name"] for entry in leases_of(service.endpoint)] == ["someone else"]
        held.release()


def test_annotated_seed_runs_only_on_gpu_workers_after_optimisation(service):
    with LocalGPUCluster(endpoint=service.endpoint, n_workers=2) as cluster, \
            Client(cluster) as client:
        # A worker without GPUs joins the same scheduler: annotated tasks must not go there.
        plain = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker",
                                  cluster.scheduler_address, "--nthreads", "2", "--no-nanny",
                                  "--name", "plain"], stderr=subprocess.DEVNULL)
        try:
            client.wait_for_workers(3, timeout=60)
            gpu_workers = {addr for addr, w in client.scheduler_info()["workers"].items()
                           if w["resources"].get("GPU")}
            assert len(gpu_workers) == 2
            with dask.annotate(resources={"GPU": 1}):
                total = seed(2000, 250)
            client.get_task_stream(start=time.time())  # starts recording
            with distributed.get_task_stream(client) as stream:
                result = total.compute(optimize_graph=True)
            assert result == pytest.approx(seed_expected(2000, 250), rel=1e-12)
            ran_on = {t["worker"] for t in stream.data}
            assert ran_on and ran_on <= gpu_workers, f"annotated tasks ran on {ran_on}"
            assert len(ran_on) == 2, "both GPU workers took part"
        finally:
            plain.terminate()
            plain.wait(timeout=30)


def test_private_service_when_none_is_configured(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUFLOW_POOL", "embedded")  # as if nothing were configured
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # no service at the default endpoint
    monkeypatch.setenv("GPUFLOW_SYSTEM_SOCKET", str(tmp_path / "none.sock"))  # nor the node's
    with LocalGPUCluster(service_options=dict(backend="host", emulated_devices=2)) as cluster:
        assert cluster.service is not None and cluster.service.running
        assert len(cluster.workers) == 2, "one worker per device of the private service"
        with Client(cluster) as client:
            assert client.submit(lambda: 21 * 2, resources={"GPU": 1}).result() == 42
        endpoint = cluster.gpuflow_endpoint
    assert cluster.service is None, "the private service stops with the cluster"
    assert not os.path.exists(endpoint[len("unix://"):])


def test_workers_ride_through_a_restart_of_the_service(tmp_path):
    # systemctl restart: the service stops (its clients hear Goodbye) and a new one starts on the
    # same socket. The workers keep their devices and the cluster its workers.
    socket = str(tmp_path / "gf.sock")
    first = gpuflow.Service(socket_path=socket, log=False, **SERVICE)
    with LocalGPUCluster(endpoint=first.endpoint, n_workers=2) as cluster, \
            Client(cluster) as client:
        client.wait_for_workers(2, timeout=60)
        workers = set(client.scheduler_info()["workers"])
        held = sorted((e["lease_id"], e["name"]) for e in leases_of(first.endpoint))
        assert [name for _, name in held] == ["dask worker 0", "dask worker 1"], held
        expected = seed_expected(400, 100)
        with gpuflow.dask.keep_annotations(), dask.annotate(resources={"GPU": 1}):
            total = seed(400, 100)
        with gpuflow.dask.keep_annotations():
            assert client.compute(total).result(timeout=120) == pytest.approx(expected)
        first.stop()
        with gpuflow.Service(socket_path=socket, log=False, **SERVICE) as second:
            # The same leases, held by the workers' new connections, not kept as jobs.
            wait_until(lambda: sorted((e["lease_id"], e["name"]) for e in leases_of(second.endpoint))
                       == held, "the workers' leases taken back")
            with gpuflow.dask.keep_annotations():
                assert client.compute(total).result(timeout=120) == pytest.approx(expected)
            assert set(client.scheduler_info()["workers"]) == workers, "a worker was replaced"
        assert cluster.status.name == "running"


def _worker_command(scheduler, endpoint, name, log):
    env = dict(os.environ, GPUFLOW_POOL=endpoint)
    return subprocess.Popen([sys.executable, "-m", "gpuflow.dask", "worker", scheduler,
                             "--nworkers", "1", "--name", name, "--death-timeout", "60"],
                            env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def test_worker_command_killed_mid_computation(service, tmp_path):
    log = open(tmp_path / "workers.log", "w")
    # The blocks' bodies wait for this file: nothing of the computation can finish before the
    # test creates it, once it has seen the killed worker's lease come back.
    gate = str(tmp_path / "gate")
    with LocalCluster(n_workers=0, processes=False, protocol="tcp", dashboard_address=None) as cluster, \
            Client(cluster) as client:
        workers = [_worker_command(cluster.scheduler_address, service.endpoint, f"node{i}", log)
                   for i in range(2)]
        try:
            client.wait_for_workers(2, timeout=60)
            assert len(leases_of(service.endpoint)) == 2

            def slow_add(block):
                # (Dask calls it here on an empty block first, to learn what it returns.)
                deadline = time.monotonic() + 300  # a hang guard, past the test's waits
                while block.size and not os.path.exists(gate) and time.monotonic() < deadline:
                    time.sleep(0.01)
                return block + 1

            with gpuflow.dask.keep_annotations(), dask.annotate(resources={"GPU": 1}):
                x = da.random.RandomState(7).normal(10, 1, size=(1600, 1600),
                                                    chunks=(200, 200))
                total = x.map_blocks(slow_add, dtype=float)[::2, ::2].sum()
            with gpuflow.dask.keep_annotations():
                future = client.compute(total)
            # Kill one worker command (nanny and worker) once both have started working.
            wait_until(lambda: all(n for n in client.processing().values()),
                       "both workers busy")
            os.killpg(workers[0].pid, signal.SIGKILL)
            wait_until(lambda: len(leases_of(service.endpoint)) == 1,
                       "the killed worker's lease is back")
            # ... while the computation is unfinished (its blocks wait for the gate): the lease
            # came back with the worker's death, not with the end of its work.
            assert not future.done()
            open(gate, "w").close()
            expected = (x.map_blocks(lambda b: b + 1, dtype=float)[::2, ::2].sum()
                        .compute(scheduler="sync"))
            assert future.result(timeout=120) == pytest.approx(expected, rel=1e-12)
        finally:
            open(gate, "w").close()  # whatever happened, no body waits on
            for w in workers:
                if w.poll() is None:
                    w.send_signal(signal.SIGTERM)
            for w in workers:
                try:
                    w.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(w.pid, signal.SIGKILL)
                    w.wait()
    assert workers[1].returncode == 0, open(tmp_path / "workers.log").read()
    wait_until(lambda: leases_of(service.endpoint) == [], "every lease back")


def test_worker_command_without_a_service_says_where_it_looked(tmp_path):
    # No service at the default endpoint, nor the node's (a machine may run one).
    env = dict(os.environ, XDG_RUNTIME_DIR=str(tmp_path),
               GPUFLOW_SYSTEM_SOCKET=str(tmp_path / "none.sock"))
    env.pop("GPUFLOW_POOL", None)
    commands = [[sys.executable, "-m", "gpuflow.dask", "worker"]]
    script = os.path.join(os.path.dirname(sys.executable), "gpuflow-dask-worker")
    if os.access(script, os.X_OK):  # installed by pip with the package
        commands.append([script])
    for command in commands:
        done = subprocess.run([*command, "tcp://127.0.0.1:1"], env=env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 2, command
        assert str(tmp_path) in done.stderr and "gpuflow serve" in done.stderr, done.stderr


def test_a_worker_hands_its_device_back_when_fair_share_asks(tmp_path):
    """Both devices are held by the cluster's workers; another process of the node asks for one.
    The service asks the most over-share holder for its lease back: that worker retires (its data
    moved first), the device goes to the waiting process, and the worker comes back once the
    device is free again. Dask's computation meanwhile completes with the exact result."""
    with gpuflow.Service(socket_path=str(tmp_path / "fair.sock"), log=False, backend="host",
                         emulated_devices=2, device_memory=64 << 20, cpu_workers=2) as service, \
            LocalGPUCluster(endpoint=service.endpoint, n_workers=2) as cluster, \
            Client(cluster) as client:
        with dask.annotate(resources={"GPU": 1}):
            x = da.random.RandomState(3).normal(10, 1, size=(1200, 1200), chunks=(200, 200))
            kept = client.persist(x + 1)
        with gpuflow.Pool(endpoint=service.endpoint, cpu_workers=1) as other:
            # Granted (not timed out) while the cluster's workers hold both devices: only the
            # worker handing its lease back can free one.
            lease = other.lease(gpus=1, name="snakemake job", timeout=120)
            wait_until(lambda: len(client.scheduler_info()["workers"]) == 1,
                       "the retired worker left the scheduler")
            holders = sorted(e["name"] for e in leases_of(service.endpoint))
            assert holders.count("snakemake job") == 1 and len(holders) == 2, holders
            with dask.annotate(resources={"GPU": 1}):
                total = kept[::2, ::2].sum()
            expected = (x + 1)[::2, ::2].sum().compute(scheduler="sync")
            assert total.compute() == pytest.approx(expected, rel=1e-12), \
                "the retired worker's data survived (moved, or recomputed)"
            lease.release()
        client.wait_for_workers(2, timeout=60)  # the worker came back on the freed device
        wait_until(lambda: len(leases_of(service.endpoint)) == 2, "two worker leases")
        assert all(w["resources"]["GPU"] == 1
                   for w in client.scheduler_info()["workers"].values())
