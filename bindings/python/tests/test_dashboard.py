"""The pool's dashboard from Python: /metrics parsed by prometheus_client's own parser and checked
against what the ABI says (ledger, device memory, run statistics), while work runs and after; the
bounded label set; the service's lease metrics; bad addresses."""
import json
import threading
import urllib.error
import urllib.request

import pytest

import gpuflow
from waiting import wait_until

parser = pytest.importorskip("prometheus_client.parser")

# (No skip for a library without the dashboard: every libgpuflow this binding is tested with has
# one, so a missing gf_pool_dashboard_url is a failure to see, not a reason to skip.)


def _get(url: str, timeout: float = 10) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        assert r.status == 200
        return r.read().decode()


def scrape(base: str) -> dict:
    """{(metric sample name, frozenset of labels): value} from /metrics, via prometheus_client."""
    out = {}
    for family in parser.text_string_to_metric_families(_get(base + "metrics")):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: dict, metric: str, /, **labels) -> float:
    return samples[(metric, frozenset(labels.items()))]


@pytest.fixture
def pool(monkeypatch):
    monkeypatch.delenv("GPUFLOW_DASHBOARD", raising=False)
    with gpuflow.Pool(cpu_workers=2, emulated_devices=2, device_memory=64 << 20, backend="host",
                      cpu_labels={"bigmem": 1}, dashboard="127.0.0.1:0") as p:
        yield p


def test_url_is_loopback_with_the_bound_port(pool):
    url = pool.dashboard_url
    assert url.startswith("http://127.0.0.1:") and url.endswith("/")
    assert int(url.rsplit(":", 1)[1].rstrip("/")) > 0
    assert "<html" in _get(url).lower()
    with pytest.raises(urllib.error.HTTPError) as e:
        _get(url + "no-such-page")
    assert e.value.code == 404


def test_no_dashboard_unless_asked(monkeypatch):
    monkeypatch.delenv("GPUFLOW_DASHBOARD", raising=False)
    with gpuflow.Pool(cpu_workers=1, emulated_devices=0, backend="host") as p:
        assert p.dashboard_url is None


def test_environment_variable_asks_for_one(monkeypatch):
    monkeypatch.setenv("GPUFLOW_DASHBOARD", "127.0.0.1:0")
    with gpuflow.Pool(cpu_workers=1, emulated_devices=0, backend="host") as p:
        assert p.dashboard_url.startswith("http://127.0.0.1:")
        assert "gpuflow_tasks" in _get(p.dashboard_url + "metrics")
    with gpuflow.Pool(cpu_workers=1, emulated_devices=0, backend="host", dashboard="off") as p:
        assert p.dashboard_url is None


@pytest.mark.parametrize("bad", ["nonsense", "127.0.0.1", "example.org:80", "127.0.0.1:99999",
                                 "127.0.0.1:x"])
def test_bad_address_is_refused(bad, monkeypatch):
    monkeypatch.delenv("GPUFLOW_DASHBOARD", raising=False)
    with pytest.raises(gpuflow.GpuflowError, match="dashboard"):
        gpuflow.Pool(cpu_workers=1, emulated_devices=0, backend="host", dashboard=bad)


def test_metrics_match_the_abi_while_work_runs_and_after(pool):
    base = pool.dashboard_url
    release = threading.Event()
    started = threading.Barrier(3, timeout=30)

    def hold():
        started.wait()
        release.wait(30)
        return 1

    def inc(x):
        return x + 1

    def boom():
        raise RuntimeError("failing on purpose")

    g = gpuflow.Graph()
    held_gpu = g.task(hold, resources={"GPU": 1, "gpu_memory": 8 << 20}, name="hold-gpu")
    held_cpu = g.task(hold, resources={"bigmem": 1}, name="hold-cpu")
    incs = [g.task(inc, i, name=f"inc-{i}") for i in range(300)]
    g.task(boom, name="boom-1", retries=1)
    run = g.submit(pool)
    started.wait()
    # Two bodies are running and hold resources: the metrics show what the ledgers say.
    samples = scrape(base)
    for w in pool.workers():
        for res, line in pool.ledger(w.index).items():
            assert value(samples, "gpuflow_ledger_capacity", worker=w.name, resource=res) == \
                line.capacity
            assert value(samples, "gpuflow_ledger_in_use", worker=w.name, resource=res) == \
                line.in_use, (w.name, res)
    in_use_gpu = sum(value(samples, "gpuflow_ledger_in_use", worker=w.name, resource="gpu_memory")
                     for w in pool.workers() if w.kind == "gpu")
    assert in_use_gpu == 8 << 20
    assert sum(value(samples, "gpuflow_ledger_in_use", worker=w.name, resource="bigmem")
               for w in pool.workers() if w.kind == "cpu") == 1
    assert value(samples, "gpuflow_tasks", state="running") >= 2
    reserved = sum(value(samples, "gpuflow_device_memory_bytes", device=str(d), kind="reserved")
                   for d in range(2))
    assert reserved == sum(pool.device_memory(d).reserved for d in range(2)) == 8 << 20

    release.set()
    run.wait(60)
    stats = run.stats()
    samples = scrape(base)
    assert value(samples, "gpuflow_tasks_settled_total", state="succeeded") == stats.succeeded
    assert value(samples, "gpuflow_tasks_settled_total", state="failed") == stats.failed == 1
    assert value(samples, "gpuflow_tasks", state="running") == 0
    assert value(samples, "gpuflow_tasks", state="queued") == 0
    # Attempts by name prefix: every attempt counted once, retries included.
    assert value(samples, "gpuflow_task_attempts_total", name="inc", outcome="succeeded") == 300
    assert value(samples, "gpuflow_task_attempts_total", name="boom", outcome="failed") == 2
    attempts = sum(v for (n, _), v in samples.items() if n == "gpuflow_task_attempts_total")
    assert attempts == stats.attempts
    assert value(samples, "gpuflow_task_duration_seconds_count", name="inc") == 300
    assert value(samples, "gpuflow_task_queue_wait_seconds_count", name="inc") == 300
    assert value(samples, "gpuflow_task_duration_seconds_count", name="hold") == 2
    # The held bodies ran at least as long as the scrape in between took.
    assert value(samples, "gpuflow_task_duration_seconds_sum", name="hold") > 0
    assert value(samples, "gpuflow_task_duration_seconds_bucket", name="inc", le="+Inf") == 300
    for d in range(2):
        mem = pool.device_memory(d)
        for kind in ("capacity", "resident", "reserved", "spilled"):
            assert value(samples, "gpuflow_device_memory_bytes", device=str(d), kind=kind) == \
                getattr(mem, kind), (d, kind)
        assert value(samples, "gpuflow_spilled_bytes_total", device=str(d)) == mem.spilled_total
    assert value(samples, "gpuflow_transfer_bytes_total") == stats.bytes_transferred
    assert value(samples, "gpuflow_transfers_total") == stats.transfers
    for w in pool.workers():
        for res, line in pool.ledger(w.index).items():
            # (results of GPU tasks stay charged while resident: whatever the ledger says)
            assert value(samples, "gpuflow_ledger_in_use", worker=w.name, resource=res) == \
                line.in_use
            assert value(samples, "gpuflow_ledger_peak_in_use", worker=w.name, resource=res) == \
                line.peak_in_use
    # The page's snapshot agrees.
    snap = json.loads(_get(base + "snapshot.json"))
    assert snap["runs"][0]["succeeded"] == stats.succeeded
    assert [w["name"] for w in snap["workers"]] == [w.name for w in pool.workers()]


def _letters(i: int) -> str:
    s = ""
    for _ in range(3):
        s += "abcdefghijklmnopqrstuvwxyz"[i % 26]
        i //= 26
    return s


def test_task_name_labels_are_bounded(pool):
    g = gpuflow.Graph()
    n = 300
    for i in range(n):
        g.task(lambda: 0, name=f"{_letters(i)}-{i}")  # 300 distinct prefixes
    run = g.submit(pool)
    run.wait(60)
    samples = scrape(pool.dashboard_url)
    names = {dict(labels)["name"] for (metric, labels) in samples
             if metric == "gpuflow_task_attempts_total"}
    assert len(names) <= 65 and "other" in names
    total = sum(v for (metric, _), v in samples.items() if metric == "gpuflow_task_attempts_total")
    assert total == n


def test_service_metrics_show_leases_and_queued_requests(tmp_path, monkeypatch):
    monkeypatch.delenv("GPUFLOW_DASHBOARD", raising=False)
    monkeypatch.delenv("GPUFLOW_POOL", raising=False)
    with gpuflow.Service(socket_path=str(tmp_path / "gf.sock"), backend="host",
                         emulated_devices=2, device_memory=64 << 20, cpu_workers=2,
                         dashboard="127.0.0.1:0") as svc:
        assert svc.dashboard_url.startswith("http://127.0.0.1:")
        with gpuflow.Pool(endpoint=svc.endpoint, cpu_workers=1) as a, \
                gpuflow.Pool(endpoint=svc.endpoint, cpu_workers=1) as b:
            with a.lease(gpus=2, name="both"):
                waiting = []
                t = threading.Thread(  # (its timeout outlasts the wait below)
                    target=lambda: waiting.append(b.lease(gpus=1, timeout=120)))
                t.start()
                seen = {}

                def metrics_agree_with_status():
                    # until the service has queued b's request and published its book
                    status = a.service_status()
                    seen["samples"] = samples = scrape(svc.dashboard_url)
                    seen["leases"] = {dict(lb)["client"]: v for (m, lb), v in samples.items()
                                      if m == "gpuflow_service_leases"}
                    seen["queued"] = {dict(lb)["client"]: v for (m, lb), v in samples.items()
                                      if m == "gpuflow_service_queued_requests"}
                    seen["want_leases"] = {str(c["client_id"]): c["leases"]
                                           for c in status["clients"]}
                    seen["want_queued"] = {str(c["client_id"]): c["queued"]
                                           for c in status["clients"]}
                    return seen["leases"] == seen["want_leases"] and \
                        seen["queued"] == seen["want_queued"] and \
                        sum(seen["queued"].values()) == 1

                wait_until(metrics_agree_with_status, interval=0.1, what=lambda: str(
                    {k: v for k, v in seen.items() if k != "samples"}))
                samples, leases = seen["samples"], seen["leases"]
                assert sum(leases.values()) == 1
                for d in range(2):
                    assert value(samples, "gpuflow_service_device_share_in_use", device=str(d)) == 1
            t.join(60)
            assert waiting, "the queued request was granted once the first lease went"
            waiting[0].release()


def test_a_taken_port_from_the_environment_is_not_fatal(pool, monkeypatch):
    taken = pool.dashboard_url[len("http://"):].rstrip("/")
    monkeypatch.setenv("GPUFLOW_DASHBOARD", taken)
    with gpuflow.Pool(cpu_workers=1, emulated_devices=0, backend="host") as second:
        assert second.dashboard_url is None  # said so on stderr, runs without
    with pytest.raises(gpuflow.GpuflowError, match=taken):
        gpuflow.Pool(cpu_workers=1, emulated_devices=0, backend="host", dashboard=taken)
