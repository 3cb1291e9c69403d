"""Which service a client finds when none is named, the same order as the
gpuflow command's: the user's own service's socket, else the node's system service's
(GPUFLOW_SYSTEM_SOCKET stands in for /run/gpuflow/gpuflow.sock), else the user's own. Only
whether a socket file is there counts, so these sockets have no listener."""
import socket

import pytest

import gpuflow
from gpuflow import _lease


def _socket_file(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()


@pytest.fixture
def places(tmp_path, monkeypatch):
    own = tmp_path / "user" / "gpuflow.sock"
    system = tmp_path / "run" / "gpuflow.sock"
    own.parent.mkdir()
    system.parent.mkdir()
    # The library reads XDG_RUNTIME_DIR once per process: stand in for its answer instead.
    monkeypatch.setattr(_lease, "default_endpoint", lambda: f"unix://{own}")
    monkeypatch.setenv("GPUFLOW_SYSTEM_SOCKET", str(system))
    return own, system


def test_no_socket_names_the_users_own(places):
    own, _ = places
    assert gpuflow.client_endpoint() == f"unix://{own}"


def test_the_system_socket_when_the_user_runs_no_service(places):
    _, system = places
    _socket_file(system)
    assert gpuflow.client_endpoint() == f"unix://{system}"


def test_the_users_own_service_comes_first(places):
    own, system = places
    _socket_file(system)
    _socket_file(own)
    assert gpuflow.client_endpoint() == f"unix://{own}"


def test_only_a_socket_counts(places):
    own, system = places
    system.write_text("not a socket\n")
    assert gpuflow.client_endpoint() == f"unix://{own}"


def test_the_system_socket_is_run_gpuflow_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("GPUFLOW_SYSTEM_SOCKET", raising=False)
    assert _lease.system_socket_path() == "/run/gpuflow/gpuflow.sock"

