"""The dashboard's page in a real browser: Debian's headless Chromium loads it while a seed-like
workload runs (CPU tasks, GPU tasks that leave data on the devices, a failing task), follows the
server-sent events for a few updates, and its DOM must show the task stream, device memory and
ledgers with the running work, with numbers that change between two loads. A screenshot must not
be blank. GPUFLOW_DASHBOARD_SCREENSHOT=PATH keeps the screenshot (docs/dashboard.png is one)."""
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request

import pytest

import gpuflow
from waiting import wait_until

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="no chromium (scripts/install-deps.sh installs it)")


def _load(x):
    time.sleep(0.002)
    return x


def _gpu_step(x):
    time.sleep(0.004)
    return bytearray(1 << 20)  # stays on its device: nobody consumes it


def _broken():
    raise RuntimeError("failing on purpose")


@pytest.fixture
def busy_pool(monkeypatch):
    monkeypatch.delenv("GPUFLOW_DASHBOARD", raising=False)
    pool = gpuflow.Pool(cpu_workers=2, emulated_devices=2, device_memory=256 << 20,
                        backend="host", dashboard="127.0.0.1:0")
    stop = threading.Event()
    # A finished run whose GPU result nobody consumed keeps it on its device until the run is
    # released: device memory shows it on every read, whatever the workload is doing then.
    g = gpuflow.Graph()
    g.task(lambda: bytearray(8 << 20), name="resident", resources={"GPU": 1})
    keeper = g.submit(pool)
    keeper.wait(60)

    def workload():
        while not stop.is_set():
            g = gpuflow.Graph()
            xs = [g.task(_load, i, name=f"load-{i}") for i in range(100)]
            for i, x in enumerate(xs[:40]):
                g.task(_gpu_step, x, name=f"gpu_step-{i}", resources={"GPU": 1,
                                                                      "gpu_memory": 4 << 20})
            g.task(_broken, name="broken-1")
            g.submit(pool).wait(60)

    thread = threading.Thread(target=workload)
    thread.start()
    yield pool
    stop.set()
    thread.join(120)
    del keeper
    pool.close()


def _chromium(tmp_path, *args, timeout=90):
    profile = tmp_path / "profile"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           f"--user-data-dir={profile}", "--hide-scrollbars", "--window-size=1400,1000",
           "--virtual-time-budget=20000", *args]
    out = subprocess.run(cmd, capture_output=True, timeout=timeout,
                         env={**os.environ, "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-2000:]
    return out.stdout.decode(errors="replace")


def _number(dom, pattern):
    m = re.search(pattern, dom)
    assert m, f"{pattern!r} not in the page"
    return m.group(1)


def _read(dom):
    dom = dom.split("<script>")[0]  # the rendered elements, not the script's own text
    return {
        "updates": int(_number(dom, r'id="updates">(\d+)<')),
        "bars": int(_number(dom, r'id="task-stream"[^>]*data-bars="(\d+)"')),
        "succeeded": int(_number(dom, r'id="tasks-succeeded"><b>(\d+)<')),
        "failed": int(_number(dom, r'id="tasks-failed"><b>(\d+)<')),
        "clock": float(_number(dom, r'id="clock">([\d.]+)<')),
        "kind": _number(dom, r'id="kind"[^>]*>([^<]+)<'),
        "resident": re.findall(r'class="n mem-resident">([^<]+)<', dom),
        "ledger": re.findall(r'class="n ledger-in-use">([^<]+)<', dom),
    }


def test_page_shows_the_running_work_and_updates_live(busy_pool, tmp_path):
    url = busy_pool.dashboard_url
    wait_until(lambda: busy_pool.device_memory(0).resident + busy_pool.device_memory(1).resident,
               "the workload leaves data on the devices")
    first = _read(_chromium(tmp_path, "--dump-dom", url + "?frames=6"))
    # Loaded again until its numbers have moved on: the workload runs on meanwhile.
    loads = []

    def moved():
        loads.append(_read(_chromium(tmp_path, "--dump-dom", url + "?frames=6")))
        return loads[-1]["succeeded"] > first["succeeded"] and loads[-1]["clock"] > first["clock"]

    wait_until(moved, lambda: f"numbers move between two loads: {first}, then {loads}")
    second = loads[-1]
    for view in (first, second):
        assert view["kind"] == "embedded pool"
        assert view["updates"] == 6, "the page followed six server-sent updates"
        assert view["bars"] > 0, "the task stream drew bars"
        assert len(view["resident"]) == 2, "one memory row per device"
        # one ledger line per resource per worker: cpu (+ nothing else) on 2 CPU workers, GPU and
        # gpu_memory on 2 devices
        assert len(view["ledger"]) == 2 + 2 * 2
    assert any(r != "0 B" for v in (first, second) for r in v["resident"]), \
        "device memory shows the data the GPU tasks left"
    assert second["failed"] >= 1, "the failing task is counted"

    shot = os.environ.get("GPUFLOW_DASHBOARD_SCREENSHOT") or str(tmp_path / "dashboard.png")
    _chromium(tmp_path, f"--screenshot={shot}", url + "?frames=12")
    data = open(shot, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 30_000, "a blank page compresses to a few KiB; this one has content"


def test_service_page_shows_leases_in_the_status_keys(tmp_path, monkeypatch):
    """The service's page draws from its status JSON's keys (lease_id, client_id, ordinal):
    each lease in its table with holder and devices, each on its device's lane, and the queue."""
    monkeypatch.delenv("GPUFLOW_DASHBOARD", raising=False)
    monkeypatch.delenv("GPUFLOW_POOL", raising=False)
    with gpuflow.Service(socket_path=str(tmp_path / "gf.sock"), backend="host",
                         emulated_devices=2, device_memory=64 << 20, cpu_workers=2,
                         dashboard="127.0.0.1:0") as svc:
        with gpuflow.Pool(endpoint=svc.endpoint, cpu_workers=1) as a, \
                gpuflow.Pool(endpoint=svc.endpoint, cpu_workers=1) as b:
            with a.lease(gpus=1, name="whole"), a.lease(gpus=0.5, name="half"):
                waiting = []
                t = threading.Thread(  # (its timeout outlasts the waits below)
                    target=lambda: waiting.append(b.lease(gpus=2, timeout=120)))
                t.start()

                def queued():
                    st = a.service_status()
                    return st if st["queued"] else None

                status = wait_until(queued, "the second request queues")

                # The page draws the book the service publishes (every 250 ms): wait until the
                # published one has these leases and this queue.
                def ids(st):
                    return (sorted(lease["lease_id"] for lease in st.get("leases", [])),
                            [q["client_id"] for q in st.get("queued", [])])

                def published():
                    with urllib.request.urlopen(svc.dashboard_url + "snapshot.json",
                                                timeout=10) as r:
                        return ids(json.loads(r.read())) == ids(status)

                wait_until(published, "the service publishes the queued request", interval=0.05)
                dom = _chromium(tmp_path, "--dump-dom", svc.dashboard_url + "?frames=2")
            t.join(60)
            waiting[0].release()
    page = dom.split("<script>")[0]
    assert _number(page, r'id="kind"[^>]*>([^<]+)<') == "node service (host)"
    holder = f"pid {os.getpid()} (python)"
    for lease in status["leases"]:
        row = re.search(r"<tr><td>#%d</td><td>([^<]*)</td><td>%s</td><td>([^<]*)</td>"
                        % (lease["lease_id"], lease["name"]), page)
        assert row, f"lease {lease['lease_id']} not in the table"
        assert holder in row.group(1)
        assert row.group(2).startswith("gpu:%d" % lease["devices"][0]["ordinal"])
    assert "×0.5" in page, "a shared device shows its share"
    assert int(_number(page, r'id="task-stream"[^>]*data-bars="(\d+)"')) == 2, \
        "each lease drawn on its device's lane"
    assert re.search(r"<tr><td>client %d</td>" % status["queued"][0]["client_id"], page)
