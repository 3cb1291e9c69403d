"""Pools: creating, inspecting and closing a gpuflow pool, and running work on it.

Pools are released by ``weakref.finalize``, which also runs them at exit before the interpreter
finalizes (runs first, then pools: reverse creation order), so no worker thread is left waiting
for the GIL of a dead interpreter.
"""
from __future__ import annotations

import ctypes
import os
import threading
import weakref
from collections import namedtuple
from ctypes import byref, c_uint32, c_void_p

from . import _ffi as F
from ._bodies import current_ctx
from ._malloc import tune_for_large_values
from ._errors import StateError, check
from ._graph import Graph, resource_array
from ._run import Future, Run, interpreter_exiting, reap_abandoned

WorkerInfo = namedtuple("WorkerInfo", "index kind device threads emulated name")
LedgerEntry = namedtuple("LedgerEntry", "resource capacity in_use peak_in_use")
DeviceMemory = namedtuple("DeviceMemory",
                          "capacity resident reserved spilled spilled_total unspilled_total")
DeviceMemory.__doc__ = (
    "One device's memory as gpuflow accounts it, in bytes: the pool's share (capacity), data "
    "held there (resident: buffers and results of tasks that ran there), gpu_memory reserved by "
    "running tasks, its data currently spilled to host, and bytes spilled / brought back since "
    "the pool started.")

# The newest gf_pool_config layout the loaded library understands.
def _newest_pool_config():
    size = F.library_struct_size(F.gf_pool_config_init)
    for layout in (F.gf_pool_config_v5, F.gf_pool_config_v4, F.gf_pool_config_v3,
                   F.gf_pool_config_v2):
        if size >= ctypes.sizeof(layout):
            return layout
    return F.gf_pool_config


_POOL_CONFIG = _newest_pool_config()

_BACKENDS = {"auto": F.GF_BACKEND_AUTO, "host": F.GF_BACKEND_HOST, "cuda": F.GF_BACKEND_CUDA}


def pool_config(cpu_workers=None, emulated_devices=None, device_memory=None, bandwidth=None,
                gpu_worker_threads=None, cpu_labels=None, gpu_labels=None, backend="auto",
                devices=None, device_memory_limit=None, spill_threshold=None, endpoint=None,
                dashboard=None, token_file=None):
    """A gf_pool_config of the newest layout the library knows, from Pool's arguments; returns
    it with the ctypes objects it points into (keep them alive while the config is used)."""
    cfg = _POOL_CONFIG()
    cfg.struct_size = ctypes.sizeof(cfg)
    try:
        cfg.backend = _BACKENDS[backend]
    except KeyError:
        raise ValueError(f"backend must be one of {sorted(_BACKENDS)}, not {backend!r}")
    if cpu_workers is not None:
        if cpu_workers < 1:
            raise ValueError("cpu_workers must be at least 1")
        cfg.cpu_workers = cpu_workers
    if emulated_devices is not None:
        cfg.emulated_devices = emulated_devices if emulated_devices > 0 else -1
    if device_memory is not None:
        cfg.emulated_device_memory = int(device_memory)
    if bandwidth is not None:
        cfg.emulated_bandwidth = float(bandwidth)
    if gpu_worker_threads is not None:
        cfg.gpu_worker_threads = gpu_worker_threads
    cpu_arr, cpu_n, keep1 = resource_array(cpu_labels)
    gpu_arr, gpu_n, keep2 = resource_array(gpu_labels)
    if cpu_n:
        cfg.cpu_worker_labels = cpu_arr
        cfg.cpu_worker_label_count = cpu_n
    if gpu_n:
        cfg.gpu_worker_labels = gpu_arr
        cfg.gpu_worker_label_count = gpu_n
    dev_arr = None
    extra = {"devices": devices, "device_memory_limit": device_memory_limit,
             "spill_threshold": spill_threshold}
    if any(v is not None for v in extra.values()):
        if _POOL_CONFIG is F.gf_pool_config:
            raise TypeError("this libgpuflow does not know devices / device_memory_limit / "
                            "spill_threshold (a newer library is needed)")
        if devices is not None:
            dev_arr = (ctypes.c_int32 * len(devices))(*devices)
            cfg.devices = ctypes.cast(dev_arr, ctypes.POINTER(ctypes.c_int32))
            cfg.device_count = len(devices)
        if device_memory_limit is not None:
            cfg.device_memory_limit = int(device_memory_limit)
        if spill_threshold is not None:
            cfg.spill_threshold = float(spill_threshold)
    if endpoint is not None:
        if _POOL_CONFIG not in (F.gf_pool_config_v3, F.gf_pool_config_v4, F.gf_pool_config_v5):
            raise TypeError("this libgpuflow has no shared pools (0.2 or newer is needed)")
        cfg.endpoint = endpoint.encode()
    if dashboard is not None:
        if _POOL_CONFIG not in (F.gf_pool_config_v4, F.gf_pool_config_v5):
            raise TypeError("this libgpuflow has no dashboard (a newer library is needed)")
        cfg.dashboard = dashboard.encode()
    if token_file is not None:
        if _POOL_CONFIG is not F.gf_pool_config_v5:
            raise TypeError("this libgpuflow has no remote services (0.6 or newer is needed)")
        cfg.token_file = os.fsencode(token_file)
    return cfg, (cpu_arr, keep1, gpu_arr, keep2, dev_arr)


def _destroy_pool(handle):
    if not reap_abandoned(handle, interpreter_exiting()):
        # At exit, with bodies of an interrupted (Ctrl-C) run still running: gf_pool_destroy
        # would wait for them. Leave the pool to the process exit instead (see gpuflow._run).
        return
    if current_ctx():
        # Dropped inside a task body of this (or another) pool: gf_pool_destroy waits for
        # running bodies, so it must not run here. Hand it to a helper thread.
        threading.Thread(target=F.gf_pool_destroy, args=(handle,), daemon=False).start()
        return
    F.gf_pool_destroy(handle)


class Pool:
    """A gpuflow pool: CPU workers plus one worker per (real or emulated) device.

    Every argument is optional (gpuflow's defaults, overridable by GPUFLOW_* environment
    variables: one CPU worker per core, two emulated 1 GiB devices without a GPU):

    - ``cpu_workers``: number of CPU worker threads.
    - ``emulated_devices``: emulated GPUs of the host backend; ``0`` means none.
    - ``device_memory``: bytes per emulated device. ``bandwidth``: bytes/s of emulated copies.
    - ``gpu_worker_threads``: tasks that may run at once on one GPU worker.
    - ``cpu_labels`` / ``gpu_labels``: extra resources every CPU / GPU worker advertises,
      e.g. ``{"bigmem": 1}``.
    - ``backend``: "auto" (default), "host" or "cuda".
    - ``devices``, ``device_memory_limit``, ``spill_threshold``: device selection, bytes per
      device the pool may use, spilling threshold (libraries that know them; see gpuflow.h).
    - ``endpoint``: the node's shared pool (``gpuflow serve``), e.g. "unix:///run/gf.sock";
      default: GPUFLOW_POOL when set, else a pool private to this process. Tasks still run in
      this process, on devices the service grants it. "tcp://HOST:PORT" is a service on another
      host (``gpuflow serve --listen``): ``token_file`` (default: GPUFLOW_TOKEN_FILE) names a
      copy of its token file.
    - ``dashboard``: "HOST:PORT" to serve the live page and Prometheus ``/metrics`` on, e.g.
      "127.0.0.1:0" (any free port: read ``dashboard_url``); default: GPUFLOW_DASHBOARD when
      set, else none; "off": none.

    Use as a context manager, or call close(); a pool left open is closed at interpreter exit.
    """

    def __init__(self, cpu_workers: int | None = None, emulated_devices: int | None = None,
                 device_memory: int | None = None, bandwidth: float | None = None,
                 gpu_worker_threads: int | None = None, cpu_labels: dict | None = None,
                 gpu_labels: dict | None = None, backend: str = "auto",
                 devices=None, device_memory_limit: int | None = None,
                 spill_threshold: float | None = None, endpoint: str | None = None,
                 dashboard: str | None = None, token_file: str | None = None):
        cfg, self._keep = pool_config(
            cpu_workers=cpu_workers, emulated_devices=emulated_devices,
            device_memory=device_memory, bandwidth=bandwidth,
            gpu_worker_threads=gpu_worker_threads, cpu_labels=cpu_labels, gpu_labels=gpu_labels,
            backend=backend, devices=devices, device_memory_limit=device_memory_limit,
            spill_threshold=spill_threshold, endpoint=endpoint, dashboard=dashboard,
            token_file=token_file)
        tune_for_large_values()
        handle = c_void_p()
        check(F.gf_pool_create_versioned(byref(handle), byref(cfg), F.GF_VERSION_MAJOR))
        self._handle = handle.value
        self._finalizer = weakref.finalize(self, _destroy_pool, self._handle)
        self._lock = threading.Lock()

    # -- lifetime
    @property
    def handle(self) -> int:
        if not self._finalizer.alive:
            raise StateError("the pool is closed", F.GF_ERR_STATE)
        return self._handle

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self):
        """Shuts the pool down: pending tasks are cancelled, running bodies waited for (also those
        of runs interrupted by Ctrl-C; at interpreter exit those are not waited for)."""
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        if self.closed:
            return "<gpuflow.Pool closed>"
        names = ", ".join(w.name for w in self.workers())
        return f"<gpuflow.Pool workers=[{names}]>"

    @property
    def dashboard_url(self) -> str | None:
        """The dashboard's address, "http://127.0.0.1:PORT/" (``/metrics`` below it), or None
        when the pool serves none."""
        if F.gf_pool_dashboard_url is None:
            return None
        url = ctypes.c_char_p()
        status = F.gf_pool_dashboard_url(byref(url), self.handle)
        if status == F.GF_ERR_NOT_FOUND:
            return None
        check(status)
        return url.value.decode()

    # -- introspection
    def workers(self) -> list[WorkerInfo]:
        n = c_uint32()
        check(F.gf_pool_worker_count(byref(n), self.handle))
        out = []
        for i in range(n.value):
            info = F.gf_worker_info()
            info.struct_size = ctypes.sizeof(F.gf_worker_info)
            check(F.gf_pool_worker_info(byref(info), self.handle, i))
            out.append(WorkerInfo(i, "gpu" if info.kind == F.GF_WORKER_GPU else "cpu",
                                  info.device, info.threads, bool(info.emulated),
                                  info.name.decode()))
        return out

    def ledger(self, worker: int) -> dict[str, LedgerEntry]:
        """Worker `worker`'s resource ledger: {resource: LedgerEntry}."""
        n = c_uint32()
        check(F.gf_pool_ledger_size(byref(n), self.handle, worker))
        out = {}
        for i in range(n.value):
            e = F.gf_ledger_entry()
            e.struct_size = ctypes.sizeof(F.gf_ledger_entry)
            check(F.gf_pool_ledger_entry(byref(e), self.handle, worker, i))
            name = e.resource.decode()
            out[name] = LedgerEntry(name, e.capacity, e.in_use, e.peak_in_use)
        return out

    def device_count(self) -> int:
        """How many (real or emulated) devices the pool drives."""
        n = c_uint32()
        check(F.gf_pool_device_count(byref(n), self.handle))
        return n.value

    def devices_source(self) -> str:
        """Where the list of devices the pool drives came from: "CUDA_VISIBLE_DEVICES=1,3",
        "SLURM_STEP_GPUS=2", "NVIDIA_VISIBLE_DEVICES=all", "all the node shows", or "the
        service's" for a connected pool (docs/service.md, "Which devices a pool drives")."""
        if F.gf_pool_devices_source is None:
            raise TypeError("this libgpuflow has no gf_pool_devices_source (a newer one is needed)")
        out = ctypes.c_char_p()
        check(F.gf_pool_devices_source(byref(out), self.handle))
        return out.value.decode()

    def device_memory(self, device: int) -> DeviceMemory:
        """Device `device`'s memory accounting (a consistent snapshot): see DeviceMemory. Results
        of tasks that ran on a GPU worker count there while resident (their size is
        ``nbytes`` or ``dask.sizeof``) and are spilled to host past the spill threshold;
        the gpu_memory line of ``ledger(worker)`` shows the same use and its peak."""
        if F.gf_pool_device_memory is None:
            raise TypeError("this libgpuflow has no gf_pool_device_memory (a newer one is needed)")
        m = F.gf_device_memory()
        m.struct_size = ctypes.sizeof(m)
        check(F.gf_pool_device_memory(byref(m), self.handle, device))
        return DeviceMemory(m.capacity, m.resident, m.reserved, m.spilled, m.spilled_total,
                            m.unspilled_total)

    def resource_names(self) -> frozenset:
        """The names of every resource some worker of this pool advertises ("cpu", "GPU",
        "gpu_memory", labels): the union of the workers' ledgers (fixed for the pool's life)."""
        names = getattr(self, "_resource_names", None)
        if names is None:
            names = frozenset(name for w in range(len(self.workers()))
                              for name in self.ledger(w))
            self._resource_names = names
        return names

    # -- the node's shared pool
    def lease(self, gpus: float = 1, gpu_memory: int = 0, cpus: float = 0, devices=None,
              priority: int = 0, name: str | None = None, timeout: float | None = None):
        """Waits for a lease from the node's service (a connected pool only): `gpus` whole
        devices, or a fraction of one; `gpu_memory` bytes per device (0: the share's part);
        `devices` restricts the ordinals. Raises TimeoutError after `timeout` seconds."""
        from ._lease import Lease
        return Lease(self, gpus, gpu_memory, cpus, devices, priority, name, timeout)

    def service_status(self) -> dict:
        """What `gpuflow status --json` shows: devices, leases, queued requests, clients."""
        from ._lease import service_status
        return service_status(self)

    # -- running
    def run(self, graph: "Graph", progress: bool | None = None) -> "Run":
        """Submits `graph` (it is frozen by the first submit) and returns its Run. `progress`:
        whether waiting for it shows a progress bar on stderr (None: when stderr is a terminal
        or a notebook's and the run lasts over a second; GPUFLOW_PROGRESS=0/1 overrides that;
        True: always; False: never)."""
        return graph.submit(self, progress)

    def submit(self, fn, *args, resources=None, priority=0, retries=0, where=None, name=None,
               **kwargs) -> "Future":
        """Runs fn(*args, **kwargs) as a one-task graph, like Dask's client.submit; returns a
        Future. Futures among the arguments are resolved (waited for) first."""
        args = tuple(a.result() if isinstance(a, Future) else a for a in args)
        kwargs = {k: (v.result() if isinstance(v, Future) else v) for k, v in kwargs.items()}
        g = Graph()
        t = g.task(fn, *args, resources=resources, priority=priority, retries=retries,
                   where=where, name=name, **kwargs)
        return Future(g.submit(self), t)

    def map(self, fn, *iterables, **options) -> list["Future"]:
        """One task per element, in one graph; returns a list of Futures."""
        g = Graph()
        tasks = [g.task(fn, *args, **options) for args in zip(*iterables)]
        run = g.submit(self)
        return [Future(run, t) for t in tasks]
