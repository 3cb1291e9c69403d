import signal

import pytest

import gpuflow

# A run started in the background of a script inherits SIGINT ignored, and Python then raises no
# KeyboardInterrupt (nor do the children it starts): the Ctrl-C tests need the default.
signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def pool():
    """One small pool for the session: 2 CPU workers, 2 emulated devices of 64 MiB."""
    with gpuflow.Pool(cpu_workers=2, emulated_devices=2, device_memory=64 << 20,
                      backend="host") as p:
        yield p
