"""A service run as a site runs it (0.8): on a socket handed over to it (as systemd's socket
activation hands one to `gpuflow serve`), and its policy replaced while leases are held."""
import socket

import pytest

import gpuflow


def test_a_service_accepts_on_a_handed_over_socket_and_leaves_its_file(tmp_path):
    path = tmp_path / "gpuflow.sock"
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(path))
    listening.listen(16)
    fd = listening.detach()  # the service owns it from now on
    with gpuflow.Service(listen_fd=fd, backend="host", emulated_devices=1,
                         device_memory=64 << 20, cpu_workers=1) as service:
        assert service.endpoint == f"unix://{path}"
        with gpuflow.Pool(endpoint=service.endpoint, cpu_workers=1) as pool:
            with pool.lease(gpus=1):
                pass
    assert path.exists(), "the socket's file is its creator's"
    with pytest.raises(gpuflow.InvalidArgumentError, match="listen_fd"):
        with open(tmp_path / "plain", "w") as plain:
            gpuflow.Service(listen_fd=plain.fileno(), backend="host", emulated_devices=1)


def test_update_policy_lowers_a_cap_without_touching_leases_held(tmp_path):
    lines = []
    with gpuflow.Service(socket_path=str(tmp_path / "gf.sock"), backend="host",
                         emulated_devices=2, device_memory=64 << 20, cpu_workers=1,
                         user_gpu_cap=2, log=lines.append) as service:
        with gpuflow.Pool(endpoint=service.endpoint, cpu_workers=1) as pool:
            with pool.lease(gpus=1):
                service.update_policy(user_gpu_cap=1, user_weights={"root": 3})
                assert "policy: user_gpu_cap 2 -> 1; weight of root 1 -> 3" in lines
                with pytest.raises(TimeoutError):
                    pool.lease(gpus=1, timeout=0.2)
                with pytest.raises(gpuflow.InvalidArgumentError, match="client_gpu_cap"):
                    service.update_policy(client_gpu_cap=-1)
                service.update_policy(user_gpu_cap=2)
                with pool.lease(gpus=1, timeout=5):
                    pass
    with pytest.raises(gpuflow.InvalidHandleError):
        service.update_policy()
