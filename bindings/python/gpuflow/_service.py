"""The node's shared pool, started from Python (gf_service_start): what `gpuflow serve` runs,
on a thread of this process. Workflow plugins start a private one when no service is configured;
tests start one per case.

    with gpuflow.Service(emulated_devices=3, socket_path="/tmp/gf.sock") as service:
        with gpuflow.Pool(endpoint=service.endpoint) as pool:
            with pool.lease(gpus=1) as lease:
                ...
"""
from __future__ import annotations

import ctypes
import os
import weakref
from ctypes import byref, c_void_p

from . import _ffi as F
from ._errors import check
from ._lease import _need_shared_pools
from ._pool import pool_config


class Service:
    """A gpuflow service listening on a unix socket; stop() (or leaving its `with` block, or
    garbage collection, or interpreter exit) tells every client Goodbye, ends every lease and
    removes the socket.

    - ``socket_path``: where to listen (default: gpuflow.default_endpoint()'s path).
    - ``group``: a group whose members may connect too (socket mode 0660).
    - ``client_gpu_cap`` / ``user_gpu_cap``: most devices one client / one user may hold.
    - ``user_weights``: {"alice": 2, ...}, fair-share weights per user.
    - ``usage_half_life``: seconds over which past usage is forgotten in fair share.
    - ``log``: called with each line the service logs (connects, leases, refusals), from the
      service's thread; None (default): the lines go to stderr; False: they are dropped.
    - ``dashboard``: "HOST:PORT" for the live page and ``/metrics`` (``dashboard_url`` after).
    - ``plugins``: kernel plugin libraries whose kernels graphs run inside the service may name.
    - ``listen`` / ``token_file``: "HOST:PORT" to accept clients of other hosts on over TCP,
      and the file holding the token they must show (created, mode 0600, when missing);
      ``remote_endpoint`` ("tcp://HOST:PORT") says where they connect.
    - ``listen_fd``: a unix stream socket already bound and listening (one systemd handed
      over) to accept on instead of creating ``socket_path``; the service owns it from then on
      and never removes its file (0.8).

    update_policy() replaces the weights, caps and half-life while it runs (0.8).
    - every other keyword is a pool option, as for gpuflow.Pool (emulated_devices,
      device_memory, cpu_workers as the CPUs it leases, backend, devices, ...).
    """

    def __init__(self, socket_path: str | None = None, group: str | None = None,
                 client_gpu_cap: float = 0.0, user_gpu_cap: float = 0.0,
                 user_weights: dict | None = None, usage_half_life: float = 0.0,
                 log=None, dashboard: str | None = None, plugins=(),
                 listen: str | None = None, token_file: str | None = None,
                 listen_fd: int | None = None, **pool_options):
        _need_shared_pools()
        if "endpoint" in pool_options:
            raise TypeError("a service owns its devices: it takes no endpoint")
        pool_cfg, keep = pool_config(**pool_options)
        if dashboard is not None and F.gf_service_dashboard_url is None:
            raise TypeError("this libgpuflow has no dashboard (a newer library is needed)")
        newest = F.gf_service_config_v5 if F.gf_service_update_policy else (
            F.gf_service_config_v3 if F.gf_service_remote_endpoint else (
                F.gf_service_config_v2 if F.gf_service_dashboard_url else F.gf_service_config))
        if (plugins or listen is not None) and not hasattr(newest, "plugins"):
            raise TypeError("this libgpuflow takes no plugins or listen address (0.6 is needed)")
        if listen_fd is not None and newest is not F.gf_service_config_v5:
            raise TypeError("this libgpuflow takes no listen_fd (0.8 is needed)")
        if listen is not None and token_file is None:
            raise TypeError("listen needs token_file: remote clients must show a token")
        cfg = newest()
        if dashboard is not None:
            cfg.dashboard = dashboard.encode()
        plugin_paths = [os.fsencode(p) for p in plugins]
        plugin_array = (ctypes.c_char_p * max(1, len(plugin_paths)))(*plugin_paths)
        if plugin_paths:
            cfg.plugins = ctypes.cast(plugin_array, ctypes.POINTER(ctypes.c_char_p))
            cfg.plugin_count = len(plugin_paths)
        if listen is not None:
            cfg.listen = listen.encode()
            cfg.token_file = os.fsencode(token_file)
        if listen_fd is not None:
            cfg.listen_fd = int(listen_fd)
        cfg.struct_size = ctypes.sizeof(cfg)
        cfg.pool = ctypes.cast(byref(pool_cfg), c_void_p)
        cfg.socket_path = socket_path.encode() if socket_path else None
        cfg.group = group.encode() if group else None
        _set_policy(cfg, client_gpu_cap, user_gpu_cap, user_weights, usage_half_life)
        self._log = None
        if log is not None:
            def forward(line, _user_data):
                if log is not False:
                    try:
                        log(line.decode(errors="replace"))
                    except Exception:  # a logger's failure must not reach the service thread
                        pass
            self._log = F.LOG_FN(forward)  # kept alive as long as the service
            cfg.log = ctypes.cast(self._log, c_void_p)
        handle = c_void_p()
        check(F.gf_service_start(byref(handle), byref(cfg)))
        del keep
        self._handle = handle.value
        self.endpoint: str = F.gf_service_endpoint(self._handle).decode()
        remote = (F.gf_service_remote_endpoint(self._handle)
                  if F.gf_service_remote_endpoint else None)
        #: "tcp://HOST:PORT" where clients of other hosts connect, or None.
        self.remote_endpoint: str | None = remote.decode() if remote else None
        url = F.gf_service_dashboard_url(self._handle) if F.gf_service_dashboard_url else None
        #: "http://HOST:PORT/" of the service's dashboard, or None.
        self.dashboard_url: str | None = url.decode() if url else None
        self._finalizer = weakref.finalize(self, F.gf_service_stop, self._handle)

    def update_policy(self, client_gpu_cap: float = 0.0, user_gpu_cap: float = 0.0,
                      user_weights: dict | None = None, usage_half_life: float = 0.0):
        """Replaces the fair-share weights, caps and half-life (the constructor's keywords and
        defaults: what is not given goes back to its default) while the service runs. Leases held
        and requests waiting stay; the next scheduling pass uses the new policy, and the service
        logs what changed. A bad value raises, naming it, and changes nothing."""
        if F.gf_service_update_policy is None:
            raise TypeError("this libgpuflow cannot update a service's policy (0.8 is needed)")
        cfg = F.gf_service_config_v5()
        cfg.struct_size = ctypes.sizeof(cfg)
        _set_policy(cfg, client_gpu_cap, user_gpu_cap, user_weights, usage_half_life)
        check(F.gf_service_update_policy(self._handle, byref(cfg)))

    @property
    def running(self) -> bool:
        return self._finalizer.alive

    def stop(self):
        """Stops the service (idempotent)."""
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self):
        return f"<gpuflow.Service {self.endpoint}{'' if self.running else ' stopped'}>"


def _set_policy(cfg, client_gpu_cap, user_gpu_cap, user_weights, usage_half_life):
    cfg.client_gpu_cap = float(client_gpu_cap)
    cfg.user_gpu_cap = float(user_gpu_cap)
    cfg.usage_half_life_s = float(usage_half_life)
    if user_weights:
        cfg.user_weights = ",".join(f"{u}={w}" for u, w in user_weights.items()).encode()
