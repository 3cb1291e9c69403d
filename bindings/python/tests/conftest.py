import gc
import time

import pytest

import gpuflow


@pytest.fixture(scope="session")
def pool():
    """One small pool for the session: 2 CPU workers, 2 emulated devices of 64 MiB."""
    with gpuflow.Pool(cpu_workers=2, emulated_devices=2, device_memory=64 << 20,
                      backend="host") as p:
        yield p


def settle_values(baseline: int, timeout: float = 5.0) -> int:
    """Waits until gpuflow holds `baseline` Python values again (destructors may run on worker
    threads shortly after a run finishes); returns the final count."""
    deadline = time.monotonic() + timeout
    while True:
        gc.collect()
        n = gpuflow.live_values()
        if n <= baseline or time.monotonic() > deadline:
            return n
        time.sleep(0.01)
