"""The node's shared pool from Python: a `gpuflow serve` process, pools connected to it (by
argument and by GPUFLOW_POOL), leases, status, and Dask on a connected pool."""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

import gpuflow
from waiting import wait_until


def _cli() -> str:
    explicit = os.environ.get("GPUFLOW_CLI")
    if explicit:
        return explicit
    lib = os.path.realpath(gpuflow.library_path)
    candidate = os.path.join(os.path.dirname(os.path.dirname(lib)), "tools", "gpuflow", "gpuflow")
    if not os.access(candidate, os.X_OK):
        pytest.skip(f"no gpuflow command next to {lib} (set GPUFLOW_CLI)")
    return candidate


@pytest.fixture
def service(tmp_path):
    """A service with 2 emulated devices of 64 MiB and 2 CPUs; yields its endpoint."""
    sock = tmp_path / "gf.sock"
    log = open(tmp_path / "serve.log", "w")
    proc = subprocess.Popen([_cli(), "serve", "--backend", "host", "--emulated-devices", "2",
                             "--emulated-device-memory", "64M", "--cpu-workers", "2",
                             "--socket", str(sock)], stdout=subprocess.PIPE, stderr=log,
                            text=True)
    line = proc.stdout.readline()  # "gpuflow serve: listening on unix://… (pid …)"
    assert "listening on" in line, line
    yield f"unix://{sock}"
    proc.terminate()
    assert proc.wait(timeout=10) == 0
    assert not sock.exists(), "the service removes its socket when it stops"


def test_connected_pool_runs_gpu_tasks_on_leased_devices(service):
    with gpuflow.Pool(endpoint=service, cpu_workers=1) as pool:
        assert [w.kind for w in pool.workers()].count("gpu") == 2, "the service's devices"
        seen = []

        def body():
            seen.append(gpuflow.current_task().env().device)
            return 1

        futures = [pool.submit(body, resources={"GPU": 1}) for _ in range(6)]
        assert sum(f.result() for f in futures) == 6
        assert all(d in (0, 1) for d in seen), seen
        clients = pool.service_status()["clients"]
        assert os.getpid() in [c["pid"] for c in clients]
    # The connection closes with the pool; the service then takes its leases back.
    with gpuflow.Pool(endpoint=service, cpu_workers=1) as watcher:
        last = {}

        def released():
            last["status"] = status = watcher.service_status()
            return status["leases"] == [] and \
                all(d["share_in_use"] == 0 for d in status["devices"])

        wait_until(released, lambda: f"the closed pool's leases are back: {last['status']}")


def test_lease_names_its_devices_and_shows_in_status(service):
    with gpuflow.Pool(endpoint=service, cpu_workers=1) as pool:
        with pool.lease(gpus=0.5, name="notebook") as lease:
            assert len(lease.devices) == 1
            d = lease.devices[0]
            assert d.share == 0.5 and d.memory == 32 << 20
            assert lease.cuda_visible_devices == d.uuid and d.uuid.startswith("GPU-")
            held = pool.service_status()["leases"]
            assert [(l["lease_id"], l["name"], l["pid"]) for l in held] == \
                [(lease.id, "notebook", os.getpid())]
            assert not lease.revoked
        assert pool.service_status()["leases"] == []
        lease.release()  # idempotent


def test_a_lease_gives_the_environment_its_jobs_run_with(service):
    with gpuflow.Pool(endpoint=service, cpu_workers=1) as pool:
        with pool.lease(gpus=0.5) as lease:
            env = lease.environment
            uuid = lease.devices[0].uuid
            ordinal = lease.devices[0].ordinal
            # The share's device alone, by UUID and by ordinal; an emulated node up to it, at the
            # share's memory; and the limits NVIDIA MPS enforces for a share.
            assert env == {
                "CUDA_VISIBLE_DEVICES": uuid,
                "NVIDIA_VISIBLE_DEVICES": uuid,
                "GPUFLOW_DEVICES": str(ordinal),
                "GPUFLOW_LEASE_ID": str(lease.id),
                "GPUFLOW_EMULATED_DEVICES": str(ordinal + 1),
                "GPUFLOW_EMULATED_DEVICE_MEMORY": str(32 << 20),
                "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50",
                "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=32M",
            }
        with pytest.raises(gpuflow.StateError, match="released"):
            lease.environment


def test_a_lease_that_cannot_be_had_in_time_raises_timeout(service):
    with gpuflow.Pool(endpoint=service, cpu_workers=1) as pool:
        with pool.lease(gpus=2):
            # The devices stay held throughout: only the request's own timeout can end it.
            with pytest.raises(TimeoutError):
                pool.lease(gpus=1, timeout=0.2)
        with pytest.raises(gpuflow.InfeasibleError, match="3"):
            pool.lease(gpus=3)


def test_a_lease_past_the_bounds_is_refused_and_the_pool_keeps_its_lease(service):
    with gpuflow.Pool(endpoint=service, cpu_workers=1) as pool:
        with pool.lease(gpus=1, name="held") as held:
            with pytest.raises(gpuflow.InvalidArgumentError,
                               match=r"gf_lease_request.name is 4097 bytes; at most "
                                     r"GF_MAX_LEASE_NAME_BYTES \(4096\)"):
                pool.lease(gpus=1, name="n" * 4097)
            with pytest.raises(gpuflow.InvalidArgumentError, match="lists device 1 twice"):
                pool.lease(gpus=1, devices=[1, 1])
            assert [l["lease_id"] for l in pool.service_status()["leases"]] == [held.id]
            with pool.lease(gpus=1, devices=[1], name="n" * 4096, timeout=5) as second:
                assert [d.ordinal for d in second.devices] == [1]
            assert not held.revoked


def _running_in_group(group: int) -> list:
    """Processes of the process group that have not ended (zombies have: init may reap late)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] not in "ZXx":
            found.append(int(entry))
    return found


def test_a_lease_bound_to_a_job_outlives_its_killed_holder_until_the_job_ends(tmp_path):
    """A program leases a device, starts a job in a process group of its own, binds it and dies
    without releasing: the service keeps the device for the job, ends it (SIGTERM, which it
    ignores, then SIGKILL after the grace), and only then hands the device on."""
    sock = tmp_path / "gf.sock"
    log = open(tmp_path / "serve.log", "w")
    serve = subprocess.Popen([_cli(), "serve", "--backend", "host", "--emulated-devices", "1",
                              "--socket", str(sock), "--job-kill-grace", "1"],
                             stdout=subprocess.PIPE, stderr=log, text=True)
    assert "listening on" in serve.stdout.readline()
    endpoint = f"unix://{sock}"
    holder = textwrap.dedent(f"""
        import os, subprocess, gpuflow
        pool = gpuflow.Pool(endpoint={endpoint!r}, cpu_workers=1)
        lease = pool.lease(gpus=1, name="bound")
        job = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 300 & wait"],
                               start_new_session=True)
        lease.bind_process_group(job.pid)
        print(job.pid, flush=True)
        os._exit(0)  # killed, as it were: no release
    """)
    try:
        start = time.monotonic()  # before the holder dies, so before the grace begins
        out = subprocess.run([sys.executable, "-c", holder], capture_output=True, text=True,
                             timeout=60, check=True).stdout
        job = int(out.split()[0])
        with gpuflow.Pool(endpoint=endpoint, cpu_workers=1) as pool:
            leases = pool.service_status()["leases"]
            assert [l["name"] for l in leases] == ["bound"], leases
            with pool.lease(gpus=1, timeout=30):
                waited = time.monotonic() - start
                assert _running_in_group(job) == [], "the job still ran when the device came"
            assert waited >= 1, "the job ignores SIGTERM: only SIGKILL, 1 s on, ends it"
            with pytest.raises(gpuflow.InvalidArgumentError, match="no process"):
                with pool.lease(gpus=1) as lease:
                    lease.bind_process_group(job)
    finally:
        serve.terminate()
        assert serve.wait(timeout=10) == 0


def test_an_embedded_pool_has_no_leases():
    with gpuflow.Pool(cpu_workers=1, emulated_devices=1, backend="host",
                      endpoint="embedded") as pool:
        with pytest.raises(gpuflow.StateError, match="embedded"):
            pool.lease(gpus=1)


def test_gpuflow_pool_in_the_environment_connects_dask(service, tmp_path):
    script = textwrap.dedent("""
        import json, os, dask
        import gpuflow, gpuflow.dask
        with dask.annotate(resources={"GPU": 1}):
            parts = [dask.delayed(lambda i: i * i)(i) for i in range(8)]
        total = dask.delayed(sum)(parts)
        print(json.dumps({"total": total.compute(scheduler="gpuflow"),
                          "clients": [c["pid"] for c in
                                      gpuflow.dask.default_pool().service_status()["clients"]],
                          "pid": os.getpid()}))
    """)
    env = dict(os.environ, GPUFLOW_POOL=service)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["total"] == sum(i * i for i in range(8))
    assert result["pid"] in result["clients"], "the Dask scheduler's pool is the service's client"
    log = (tmp_path / "serve.log").read_text()
    assert "lease" in log and "granted" in log, log


def test_service_started_from_python_grants_distinct_devices_and_stops_cleanly(tmp_path):
    sock = tmp_path / "py.sock"
    with gpuflow.Service(socket_path=str(sock), backend="host", emulated_devices=3,
                         device_memory=64 << 20, cpu_workers=2) as service:
        assert service.endpoint == f"unix://{sock}"
        assert sock.exists()
        with gpuflow.Pool(endpoint=service.endpoint, cpu_workers=1) as pool:
            leases = [pool.lease(gpus=1, name=f"job{i}") for i in range(3)]
            uuids = [lease.cuda_visible_devices for lease in leases]
            assert len(set(uuids)) == 3, uuids
            with pytest.raises(TimeoutError):
                pool.lease(gpus=1, timeout=0.05)  # all three are held
            held = pool.service_status()["leases"]
            assert sorted(entry["name"] for entry in held) == ["job0", "job1", "job2"]
            for lease in leases:
                lease.release()
            assert pool.service_status()["leases"] == []
            with pytest.raises(gpuflow.StateError, match="already listens|in use"):
                gpuflow.Service(socket_path=str(sock), backend="host", emulated_devices=1)
    assert not service.running
    assert not sock.exists(), "stop() removes the socket"
    service.stop()  # idempotent
    with pytest.raises(TypeError, match="endpoint"):
        gpuflow.Service(socket_path=str(tmp_path / "x.sock"), endpoint="unix:///x")


def test_a_pool_on_another_host_connects_over_tcp_with_the_token(tmp_path):
    """A service listening on TCP (as for clients of other hosts; loopback here): Python tasks run
    on devices it leases, given its token; a wrong token is refused naming the reason."""
    token = tmp_path / "token"
    log = open(tmp_path / "serve.log", "w")
    proc = subprocess.Popen([_cli(), "serve", "--backend", "host", "--emulated-devices", "2",
                             "--cpu-workers", "2", "--socket", str(tmp_path / "gf.sock"),
                             "--listen", "127.0.0.1:0", "--insecure-listen",
                              "--token-file", str(token)],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        assert "listening on" in proc.stdout.readline()
        line = proc.stdout.readline()  # "gpuflow serve: remote clients connect to tcp://…"
        endpoint = line.split()[6]
        assert endpoint.startswith("tcp+insecure://127.0.0.1:"), line
        with gpuflow.Pool(endpoint=endpoint, token_file=str(token), cpu_workers=1) as pool:
            # Python bodies run here, on this host's CPUs; the service's devices are on its
            # host, so a body that needs one cannot run here, and says so.
            assert [w.kind for w in pool.workers()] == ["cpu"]
            futures = [pool.submit(lambda i=i: i * i) for i in range(4)]
            assert [f.result() for f in futures] == [0, 1, 4, 9]
            with pytest.raises(gpuflow.InfeasibleError):
                pool.submit(lambda: 1, resources={"GPU": 1}).result()
            clients = pool.service_status()["clients"]
            assert any("@127.0.0.1:" in c["user"] for c in clients), clients
        wrong = tmp_path / "wrong"
        wrong.write_text("0123456789abcdef-not-it\n")
        with pytest.raises(gpuflow.GpuflowError, match="wrong token"):
            gpuflow.Pool(endpoint=endpoint, token_file=str(wrong), cpu_workers=1)
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_a_service_started_from_python_serves_remote_clients(tmp_path, monkeypatch):
    """gpuflow.Service(listen=..., token_file=..., plugins=...): the same as `gpuflow serve
    --listen --insecure-listen --token-file --plugin`, from Python (plain TCP asked for by name
    through the environment, as gf_service_start reads it)."""
    monkeypatch.setenv("GPUFLOW_SERVE_INSECURE_LISTEN", "1")
    token = tmp_path / "token"
    with gpuflow.Service(socket_path=str(tmp_path / "gf.sock"), backend="host",
                         emulated_devices=1, cpu_workers=2, listen="127.0.0.1:0",
                         token_file=str(token), log=False) as service:
        assert service.remote_endpoint.startswith("tcp+insecure://127.0.0.1:")
        assert oct(token.stat().st_mode & 0o777) == "0o600"
        with gpuflow.Pool(endpoint=service.remote_endpoint, token_file=str(token),
                          cpu_workers=1) as pool:
            assert pool.submit(lambda: 6 * 7).result() == 42
            users = [c["user"] for c in pool.service_status()["clients"]]
            assert any("@127.0.0.1:" in u for u in users), users
    with pytest.raises(TypeError, match="token_file"):
        gpuflow.Service(socket_path=str(tmp_path / "other.sock"), listen="127.0.0.1:0")
    # Plugins are loaded (and checked) at start: a missing one stops it, named.
    with pytest.raises(gpuflow.GpuflowError, match="no-such-plugin.so"):
        gpuflow.Service(socket_path=str(tmp_path / "third.sock"), backend="host",
                        plugins=[str(tmp_path / "no-such-plugin.so")], log=False)
