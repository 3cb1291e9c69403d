"""What watching a pool costs it, as bench/dashboard_overhead.sh measures: one process that
follows the live page's stream (/events, as the browser does) and scrapes /metrics every second,
retrying quietly until the dashboard is up. Counts what it got on stdout when stopped (SIGTERM).

    python3 bench/dashboard_watch.py PORT
"""
import signal
import sys
import threading
import time
import urllib.request

port = int(sys.argv[1])
base = f"http://127.0.0.1:{port}/"
counts = {"events": 0, "scrapes": 0}
stop = threading.Event()


def follow():
    while not stop.is_set():
        try:
            with urllib.request.urlopen(base + "events", timeout=5) as r:
                for line in r:
                    if line.startswith(b"data: "):
                        counts["events"] += 1
                    if stop.is_set():
                        return
        except OSError:
            time.sleep(0.02)


threading.Thread(target=follow, daemon=True).start()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
while not stop.is_set():
    try:
        with urllib.request.urlopen(base + "metrics", timeout=2) as r:
            if b"# TYPE gpuflow_tasks gauge" in r.read():
                counts["scrapes"] += 1
        stop.wait(1.0)
    except OSError:
        stop.wait(0.02)
print(counts["events"], counts["scrapes"], flush=True)
