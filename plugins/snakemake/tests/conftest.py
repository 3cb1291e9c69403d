"""Fixtures for the executor tests: a gpuflow service with 3 emulated devices in this process."""
import sys

import pytest

import gpuflow

from snakemake_testing import DEVICES, PLUGIN_SRC

# This checkout's plugin, installed or not (the snakemake children get the same on PYTHONPATH).
sys.path.insert(0, str(PLUGIN_SRC))


@pytest.fixture
def service(tmp_path_factory):
    """The node's service for one test: 3 emulated devices of 64 MiB, 2 CPUs. Yields it; its
    ledger is checked by the tests themselves (leases_left)."""
    sock = tmp_path_factory.mktemp("service") / "gf.sock"
    svc = gpuflow.Service(socket_path=str(sock), backend="host", emulated_devices=DEVICES,
                          device_memory=64 << 20, cpu_workers=2)
    yield svc
    svc.stop()
