"""Devices handed down from Python: a pool drives exactly those CUDA_VISIBLE_DEVICES, Slurm or
Kubernetes name (here on emulated devices), says where the list came from, refuses a missing
one by name; a service started with such a list leases their UUIDs (Lease.cuda_visible_devices)."""
import os
import subprocess

import pytest

import gpuflow

from test_shared_pool import _cli

_VARIABLES = ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS",
              "NVIDIA_VISIBLE_DEVICES")


def _emulated(n: int) -> str:
    return f"GPU-00000000-gpuf-emul-0000-{n:012d}"


@pytest.fixture
def handed(monkeypatch):
    """Sets exactly the given variables of the list (the library reads them at pool creation)."""
    for v in _VARIABLES:
        monkeypatch.delenv(v, raising=False)
    return lambda **values: [monkeypatch.setenv(k, v) for k, v in values.items()]


def _pool():
    return gpuflow.Pool(cpu_workers=1, emulated_devices=4, backend="host")


def test_pool_drives_the_devices_handed_down(handed):
    handed(SLURM_JOB_GPUS="0,1,2,3", SLURM_STEP_GPUS="3,1")
    with _pool() as pool:
        assert pool.device_count() == 2
        assert pool.devices_source() == "SLURM_STEP_GPUS=3,1"


def test_nothing_handed_down_is_the_whole_node(handed):
    handed()
    with _pool() as pool:
        assert pool.device_count() == 4
        assert pool.devices_source() == "all the node shows"


def test_missing_device_is_refused_by_name(handed):
    handed(CUDA_VISIBLE_DEVICES="2,9")
    with pytest.raises(gpuflow.NotFoundError) as e:
        _pool()
    assert "CUDA_VISIBLE_DEVICES='2,9' names device '9', which does not exist" in str(e.value)


def test_service_with_a_list_leases_those_uuids(tmp_path, handed):
    handed()
    sock = tmp_path / "gf.sock"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="1,3")
    proc = subprocess.Popen([_cli(), "serve", "--backend", "host", "--emulated-devices", "4",
                             "--cpu-workers", "1", "--socket", str(sock)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert "listening on" in proc.stdout.readline()
        with gpuflow.Pool(endpoint=f"unix://{sock}", cpu_workers=1) as pool:
            assert pool.devices_source() == "the service's"
            assert pool.service_status()["devices_source"] == "CUDA_VISIBLE_DEVICES=1,3"
            with pool.lease(gpus=2) as lease:
                assert lease.cuda_visible_devices == f"{_emulated(1)},{_emulated(3)}"
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
