"""Leases from the node's shared pool (gf_lease_*): devices, or a share of one, held by this
process until released. Use as a context manager:

    with pool.lease(gpus=1, name="training") as lease:
        os.environ["CUDA_VISIBLE_DEVICES"] = lease.cuda_visible_devices
        ...
"""
from __future__ import annotations

import ctypes
import json
import os
import stat
import weakref
from collections import namedtuple
from ctypes import byref, c_double, c_int32, c_uint32, c_uint64, c_void_p

from . import _ffi as F
from ._errors import StateError, check

LeasedDevice = namedtuple("LeasedDevice", "ordinal uuid pci_bus_id share memory")


def _need_shared_pools():
    if F.gf_lease_acquire is None:
        raise StateError("this libgpuflow has no shared pools (0.2 or newer is needed)",
                         F.GF_ERR_STATE)


class Lease:
    """Devices (whole, or a share of one) and CPUs granted by the node's service. Released by
    release(), by leaving its `with` block, when garbage-collected, or when this process's
    connection to the service closes, whatever ends the process."""

    def __init__(self, pool, gpus: float = 1, gpu_memory: int = 0, cpus: float = 0,
                 devices=None, priority: int = 0, name: str | None = None,
                 timeout: float | None = None):
        _need_shared_pools()
        request = F.gf_lease_request()
        request.struct_size = ctypes.sizeof(request)
        request.gpus = float(gpus)
        request.gpu_memory = int(gpu_memory)
        request.cpus = float(cpus)
        keep = None
        if devices:
            keep = (c_int32 * len(devices))(*devices)
            request.devices = ctypes.cast(keep, ctypes.POINTER(c_int32))
            request.device_count = len(devices)
        request.priority = priority
        request.name = name.encode() if name else None
        timeout_ms = -1 if timeout is None else int(timeout * 1000)
        handle = c_void_p()
        status = F.gf_lease_acquire(byref(handle), pool.handle, byref(request), timeout_ms)
        if status == F.GF_TIMEOUT:
            raise TimeoutError(F.gf_last_error().decode())
        check(status)
        del keep
        self._handle = handle.value
        self._finalizer = weakref.finalize(self, F.gf_lease_release, self._handle)
        lease_id, count, cpu_share = c_uint64(), c_uint32(), c_double()
        check(F.gf_lease_info(byref(lease_id), byref(count), byref(cpu_share), self._handle))
        self.id = lease_id.value
        self.cpus = cpu_share.value
        self.devices = []
        for i in range(count.value):
            d = F.gf_lease_device()
            d.struct_size = ctypes.sizeof(d)
            check(F.gf_lease_device_info(byref(d), self._handle, i))
            self.devices.append(LeasedDevice(d.ordinal, d.uuid.decode(), d.pci_bus_id.decode(),
                                             d.share, d.memory))

    @property
    def cuda_visible_devices(self) -> str:
        """The value for CUDA_VISIBLE_DEVICES: the devices' UUIDs, which survive renumbering."""
        return ",".join(d.uuid for d in self.devices)

    @property
    def environment(self) -> dict[str, str]:
        """What a process running on the lease needs in its environment (gf_lease_environment):
        the devices by UUID for CUDA and container runtimes, by ordinal for gpuflow, the lease's
        id, and for emulated devices or a share of one device the settings that make a pool or
        NVIDIA MPS in that process keep to the lease. `gpuflow lease` runs its command with
        exactly these."""
        if F.gf_lease_environment is None:
            raise StateError("this libgpuflow has no gf_lease_environment (0.10 or newer is needed)",
                             F.GF_ERR_STATE)
        if not self._finalizer.alive:
            raise StateError("the lease was released", F.GF_ERR_STATE)
        out = ctypes.c_char_p()
        check(F.gf_lease_environment(byref(out), self._handle))
        return dict(line.split("=", 1) for line in out.value.decode().splitlines())

    @property
    def revoked(self) -> bool:
        """True once the service has asked for the lease back (or the connection is gone)."""
        if not self._finalizer.alive:
            return True
        out = c_int32()
        check(F.gf_lease_revoked(byref(out), self._handle))
        return bool(out.value)

    def bind_process_group(self, process_group: int):
        """Makes the lease own a job: the processes of `process_group` (this host, this user; e.g.
        subprocess.Popen(..., process_group=0).pid) run on its devices. Should this process end
        without releasing the lease, the service keeps the devices from others until no process
        of the group is left, and ends the group (SIGTERM, then SIGKILL after a grace period)."""
        if F.gf_lease_bind_process_group is None:
            raise StateError("this libgpuflow cannot bind a process group (0.7 or newer is needed)",
                             F.GF_ERR_STATE)
        if not self._finalizer.alive:
            raise StateError("the lease was released", F.GF_ERR_STATE)
        check(F.gf_lease_bind_process_group(self._handle, int(process_group)))

    def release(self):
        """Hands the lease back (idempotent)."""
        if self._finalizer.alive:
            self._finalizer.detach()
            check(F.gf_lease_release(self._handle))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        where = ", ".join(f"gpu:{d.ordinal}" + (f"x{d.share:g}" if d.share < 1 else "")
                          for d in self.devices)
        state = "released" if not self._finalizer.alive else "held"
        return f"<gpuflow.Lease {self.id} {where or 'cpu only'} {state}>"


def service_status(pool) -> dict:
    """The service's view of the node as a dict: devices, leases, queued, clients."""
    _need_shared_pools()
    out = F.gf_bytes()
    check(F.gf_pool_service_status(byref(out), pool.handle, F.GF_STATUS_JSON))
    try:
        return json.loads(ctypes.string_at(out.data, out.size).decode())
    finally:
        F.gf_bytes_free(byref(out))


def default_endpoint() -> str:
    """Where `gpuflow serve` listens by default ("unix:///…")."""
    _need_shared_pools()
    return F.gf_default_endpoint().decode()


def system_socket_path() -> str:
    """The node's system service's socket (the gpuflow.socket unit's); GPUFLOW_SYSTEM_SOCKET,
    when set, stands in for it."""
    return os.environ.get("GPUFLOW_SYSTEM_SOCKET") or "/run/gpuflow/gpuflow.sock"


def _socket_at(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def client_endpoint() -> str:
    """Where a client looks when no service is named (no endpoint, no GPUFLOW_POOL), as the
    gpuflow command does: the user's own service (default_endpoint()) when a socket is there,
    else the node's system service when a socket is there, else the user's own ("unix:///…")."""
    own = default_endpoint()
    if _socket_at(own[len("unix://"):]):
        return own
    system = system_socket_path()
    return "unix://" + system if _socket_at(system) else own
