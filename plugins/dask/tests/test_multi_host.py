"""Dask distributed across hosts on gpuflow: the hosts are network namespaces this test creates
(a bridge in one, a veth into each of three more): a Dask scheduler in one, and two "nodes",
each with its own gpuflow service of 2 emulated devices and workers started with the worker
command (python -m gpuflow.dask worker). The seed workload, annotated resources={"GPU": 1}, runs
from a client on the scheduler's host; its sum is checked, its tasks ran on both nodes'
workers, and when the workers stop each node's ledger is back to zero. Skipped, with the reason,
where namespaces cannot be made (not root, no iproute2)."""
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

pytest.importorskip("distributed")

import gpuflow  # noqa: E402

SUBNET = "10.231.77"


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


class Hosts:
    """Namespaces joined by a bridge; host i has address SUBNET.(i+1)."""

    def __init__(self, names):
        tag = uuid.uuid4().hex[:6]
        self.hub = f"gfhub-{tag}"
        self.ns = {name: f"gf{name}-{tag}" for name in names}
        self.address = {}
        _ip("netns", "add", self.hub)
        try:
            _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.hub, "link", "set", "br0", "up")
            for i, (name, ns) in enumerate(self.ns.items()):
                _ip("netns", "add", ns)
                outer, inner = f"gfo{i}-{tag}", f"gfi{i}-{tag}"
                _ip("link", "add", outer, "netns", self.hub, "type", "veth", "peer", "name",
                    inner, "netns", ns)
                _ip("-n", self.hub, "link", "set", outer, "master", "br0")
                _ip("-n", self.hub, "link", "set", outer, "up")
                self.address[name] = f"{SUBNET}.{i + 1}"
                _ip("-n", ns, "addr", "add", f"{self.address[name]}/24", "dev", inner)
                _ip("-n", ns, "link", "set", inner, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.remove()
            raise

    def popen(self, name, argv, **kwargs):
        return subprocess.Popen(["ip", "netns", "exec", self.ns[name], *argv], **kwargs)

    def run(self, name, argv, **kwargs):
        return subprocess.run(["ip", "netns", "exec", self.ns[name], *argv], **kwargs)

    def remove(self):
        for ns in [*self.ns.values(), self.hub]:
            _ip("netns", "del", ns, check=False)


@pytest.fixture
def hosts():
    if os.geteuid() != 0:
        pytest.skip("creating network namespaces needs root")
    if not shutil.which("ip"):
        pytest.skip("no `ip` command (iproute2)")
    probe = f"gfprobe-{uuid.uuid4().hex[:6]}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot create network namespaces here: {made.stderr.strip()}")
    _ip("netns", "del", probe, check=False)
    h = Hosts(["sched", "node1", "node2"])
    yield h
    h.remove()


def _cli():
    lib = os.path.realpath(gpuflow.library_path)
    cli = os.path.join(os.path.dirname(os.path.dirname(lib)), "tools", "gpuflow", "gpuflow")
    if not os.access(cli, os.X_OK):
        pytest.skip(f"no gpuflow command next to {lib}")
    return cli


CLIENT = textwrap.dedent("""
    import json, sys, dask, dask.array as da, distributed, gpuflow.dask
    from distributed import Client
    n, c = int(sys.argv[2]), int(sys.argv[3])
    with Client(sys.argv[1], timeout=60) as client:
        client.wait_for_workers(4, timeout=90)
        workers = {a: w["name"] for a, w in client.scheduler_info()["workers"].items()}
        resources = {w["name"]: w["resources"] for w in client.scheduler_info()["workers"].values()}
        def seed():
            x = da.random.RandomState(42).normal(10, 1, size=(n, n), chunks=(c, c))
            return (x + 1)[::2, ::2].sum()
        with gpuflow.dask.keep_annotations():
            with dask.annotate(resources={"GPU": 1}):
                total = seed()
            with distributed.get_task_stream(client) as stream:
                value = total.compute()
        devices = client.run(lambda: __import__("os").environ["CUDA_VISIBLE_DEVICES"])
    print(json.dumps({"value": float(value), "expected": float(seed().compute(scheduler="sync")),
                      "ran_on": sorted({workers.get(t["worker"], t["worker"])
                                        for t in stream.data}),
                      "resources": resources,
                      "devices": {workers[a]: d for a, d in devices.items()}}))
""")


def _status(cli, endpoint):
    out = subprocess.run([cli, "status", "--pool", endpoint, "--json"], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    return json.loads(out)


def test_seed_workload_across_two_nodes_on_their_leased_devices(hosts, tmp_path):
    cli = _cli()
    procs = []
    log = open(tmp_path / "processes.log", "w")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    try:
        scheduler = f"tcp://{hosts.address['sched']}:8786"
        procs.append(hosts.popen("sched", [sys.executable, "-m", "distributed.cli.dask_scheduler",
                                           "--host", hosts.address["sched"], "--port", "8786",
                                           "--no-dashboard"], stdout=log, stderr=log, env=env))
        endpoints = {}
        for node in ("node1", "node2"):
            sock = tmp_path / f"{node}.sock"
            endpoints[node] = f"unix://{sock}"
            serve = hosts.popen(node, [cli, "serve", "--backend", "host", "--emulated-devices",
                                       "2", "--emulated-device-memory", "256M", "--socket",
                                       str(sock)], stdout=subprocess.PIPE, stderr=log, text=True)
            procs.append(serve)
            assert "listening on" in serve.stdout.readline()
        workers = []
        for node in ("node1", "node2"):
            workers.append(hosts.popen(node, [
                sys.executable, "-m", "gpuflow.dask", "worker", scheduler, "--pool",
                endpoints[node], "--host", hosts.address[node], "--name", node,
                "--death-timeout", "60"], stdout=log, stderr=log, env=env))
        procs.extend(workers)

        done = hosts.run("sched", [sys.executable, "-c", CLIENT, scheduler, "3000", "500"],
                         capture_output=True, text=True, timeout=240, env=env)
        assert done.returncode == 0, done.stderr[-4000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])
        assert result["value"] == pytest.approx(result["expected"], rel=1e-12)
        assert result["ran_on"], "no task recorded"
        nodes_used = {name.split("-")[0] for name in result["ran_on"]}
        assert nodes_used == {"node1", "node2"}, result["ran_on"]
        assert all(r["GPU"] == 1 for r in result["resources"].values()), result["resources"]
        # Each node's two workers hold its two devices, one each.
        for node in ("node1", "node2"):
            status = _status(cli, endpoints[node])
            assert len(status["leases"]) == 2
            mine = sorted(d for name, d in result["devices"].items() if name.startswith(node))
            assert mine == sorted(lease["devices"][0]["uuid"] for lease in status["leases"])

        for w in workers:
            w.terminate()
        for w in workers:
            assert w.wait(timeout=60) == 0
        for node in ("node1", "node2"):
            status = _status(cli, endpoints[node])
            assert status["leases"] == [] and status["queued"] == []
            assert all(d["share_in_use"] == 0 and d["memory_in_use"] == 0
                       for d in status["devices"]), status["devices"]
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 30
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        log.close()
