import pytest

import gpuflow


@pytest.fixture(scope="session")
def pool():
    """One small pool for the session: 2 CPU workers, 2 emulated devices of 64 MiB."""
    with gpuflow.Pool(cpu_workers=2, emulated_devices=2, device_memory=64 << 20,
                      backend="host") as p:
        yield p
