"""Pools, graphs, runs and futures over the C ABI (see include/gpuflow.h).

Ownership rules implemented here (docs/threading.md):
- Python objects handed to gpuflow (task results, host values) live in ``_VALUES`` under an
  integer key; that key is the opaque ``void *`` gpuflow stores. gpuflow calls the destructor
  ``_DESTROY`` exactly once when it frees the data, which drops the entry. No Py_IncRef games.
- Task bodies are one module-level CFUNCTYPE trampoline; ``user_data`` encodes (graph id, task
  index) into the per-graph table ``_GRAPHS``. Each C graph owns one host value (the "anchor")
  whose destructor removes its table once the graph and every run of it are gone, so the table
  (callables, arguments, recorded exceptions) lives exactly as long as C can call a body.
- Every CFUNCTYPE object is module-level, hence referenced for the life of the interpreter.
- Pools, graphs and runs are released by ``weakref.finalize``, which also runs them at exit
  before the interpreter finalizes (runs first, then pools: reverse creation order), so no
  worker thread is left waiting for the GIL of a dead interpreter.
- Waiting uses gf_run_wait in slices with the GIL released (ctypes.CDLL), so Ctrl-C interrupts
  it: the run is cancelled and KeyboardInterrupt re-raised.
"""
from __future__ import annotations

import ctypes
import itertools
import re
import threading
import time
import traceback
import weakref
from collections import namedtuple
from ctypes import byref, c_char_p, c_int, c_uint32, c_uint64, c_void_p

from . import _ffi as F

__all__ = [
    "GpuflowError", "InvalidArgumentError", "InvalidHandleError", "StructSizeError",
    "VersionMismatchError", "InvalidGraphError", "InfeasibleError", "OutOfMemoryError",
    "TaskFailedError", "CancelledError", "StateError", "NotFoundError", "ShutDownError",
    "SystemCallError", "InternalError", "Pool", "Graph", "Task", "Data", "Run", "Future",
    "WorkerInfo", "LedgerEntry", "TaskEnv", "RunStats", "current_task", "version",
]

# ------------------------------------------------------------------------------------------
# Errors: one class per gf_status, carrying gpuflow's message (gf_last_error).
# ------------------------------------------------------------------------------------------


class GpuflowError(Exception):
    """An error reported by gpuflow. ``status`` is the gf_status (negative int), ``message``
    the text gf_last_error() gave (it names the culprit)."""

    status = None

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status

    @property
    def status_name(self) -> str:
        return F.status_name(self.status) if self.status is not None else ""


class InvalidArgumentError(GpuflowError, ValueError):
    status = F.GF_ERR_INVALID_ARGUMENT


class InvalidHandleError(GpuflowError, ValueError):
    status = F.GF_ERR_INVALID_HANDLE


class StructSizeError(GpuflowError):
    status = F.GF_ERR_STRUCT_SIZE


class VersionMismatchError(GpuflowError):
    status = F.GF_ERR_VERSION_MISMATCH


class InvalidGraphError(GpuflowError, ValueError):
    status = F.GF_ERR_INVALID_GRAPH


class InfeasibleError(GpuflowError):
    status = F.GF_ERR_INFEASIBLE


class OutOfMemoryError(GpuflowError, MemoryError):
    status = F.GF_ERR_OUT_OF_MEMORY


class TaskFailedError(GpuflowError):
    status = F.GF_ERR_TASK_FAILED


class CancelledError(GpuflowError):
    status = F.GF_ERR_CANCELLED


class StateError(GpuflowError, RuntimeError):
    status = F.GF_ERR_STATE


class NotFoundError(GpuflowError, LookupError):
    status = F.GF_ERR_NOT_FOUND


class ShutDownError(GpuflowError, RuntimeError):
    status = F.GF_ERR_SHUT_DOWN


class SystemCallError(GpuflowError, OSError):
    status = F.GF_ERR_SYSTEM


class InternalError(GpuflowError):
    status = F.GF_ERR_INTERNAL


_ERRORS = {cls.status: cls for cls in (
    InvalidArgumentError, InvalidHandleError, StructSizeError, VersionMismatchError,
    InvalidGraphError, InfeasibleError, OutOfMemoryError, TaskFailedError, CancelledError,
    StateError, NotFoundError, ShutDownError, SystemCallError, InternalError)}


def _error(status: int, message: str | None = None) -> GpuflowError:
    if message is None:
        message = F.last_error()
    cls = _ERRORS.get(status, GpuflowError)
    return cls(message or F.status_name(status), status)


def _check(status: int) -> int:
    if status < 0:
        raise _error(status)
    return status


def version() -> str:
    """The loaded library's version, "major.minor.patch"."""
    return F.gf_version_string().decode()


# ------------------------------------------------------------------------------------------
# Opaque values: Python objects owned by gpuflow through an integer key.
# ------------------------------------------------------------------------------------------

_VALUES: dict[int, object] = {}
_next_value_key = itertools.count(1).__next__  # atomic under the GIL; 0 is never used


def _destroy_value(key):
    # Runs on whichever thread drops gpuflow's last reference, with the GIL (ctypes callback).
    # It must not call into gpuflow, and it does not.
    _VALUES.pop(key, None)


_DESTROY = F.DESTROY_FN(_destroy_value)
_DESTROY_ADDR = ctypes.cast(_DESTROY, c_void_p).value


def _put_value(obj) -> int:
    key = _next_value_key()
    _VALUES[key] = obj
    return key


def live_values() -> int:
    """How many Python objects gpuflow holds right now (for leak checks in tests)."""
    return len(_VALUES)


# ------------------------------------------------------------------------------------------
# Task bodies: one trampoline for every Python task.
# ------------------------------------------------------------------------------------------

_GRAPHS: dict[int, "_GraphState"] = {}
_next_graph_id = itertools.count(1).__next__
_INDEX_BITS = 32
_INDEX_MASK = (1 << _INDEX_BITS) - 1
_tls = threading.local()
_EXC_TOKEN = re.compile(r"\[python exception #(\d+)\]")


class _GraphState:
    """What the bodies of one graph need: specs by task index, recorded exceptions."""

    __slots__ = ("specs", "exceptions", "gid", "__weakref__")

    def __init__(self, gid):
        self.gid = gid
        self.specs = []
        self.exceptions = {}


def _drop_graph_state(gid):
    _GRAPHS.pop(gid, None)


_ANCHOR_DESTROY = F.DESTROY_FN(_drop_graph_state)
_ANCHOR_DESTROY_ADDR = ctypes.cast(_ANCHOR_DESTROY, c_void_p).value

_next_exc_token = itertools.count(1).__next__


def record_failure(ctx, gid: int, exc: BaseException) -> int:
    """Remembers exc for the graph and fails the attempt with its text; returns 1 (failure)."""
    state = _GRAPHS.get(gid)
    token = _next_exc_token()
    if state is not None:
        state.exceptions[token] = exc
    try:
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    except BaseException:  # a broken __str__ must not escape into C
        text = type(exc).__name__
    F.gf_task_ctx_fail(ctx, f"{text} [python exception #{token}]".encode("utf-8", "replace"))
    return 1


def _scratch():
    """A per-thread pair of out-parameters for gf_task_ctx_input: (buffer, ptr address)."""
    try:
        return _tls.scratch
    except AttributeError:
        buf = (c_uint64 * 2)()
        _tls.scratch = s = (buf, ctypes.addressof(buf), ctypes.addressof(buf) + 8)
        return s


def read_input(ctx, index: int):
    """The Python object of opaque-value input `index` of the running task."""
    buf, p_addr, s_addr = _scratch()
    st = F.gf_task_ctx_input(p_addr, s_addr, ctx, index)
    if st != 0:
        raise _error(st)
    return _VALUES[buf[0]]


_PyGILState_Ensure = ctypes.pythonapi.PyGILState_Ensure
_PyGILState_Ensure.restype = c_int
_PyGILState_Ensure.argtypes = ()


def pin_thread_state():
    """Keeps this foreign (worker) thread's Python thread state alive between callbacks.

    A ctypes callback on a thread Python has never seen creates a thread state on entry and
    deletes it on exit (PyGILState_Ensure/Release): ~15 us per task body, and threading.local
    data vanishes between calls. One extra PyGILState_Ensure, never released, keeps the state
    for the thread's life; the interpreter clears such states at finalization, like those of
    daemon threads. Called at the start of every body; a cheap attribute test after the first.
    """
    if not hasattr(_tls, "pinned"):
        _PyGILState_Ensure()
        _tls.pinned = True


def _py_body(ctx, user_data):
    """Body of every task made by Graph.task: resolve inputs, call, store the result."""
    gid = user_data >> _INDEX_BITS
    try:
        if not hasattr(_tls, "pinned"):
            pin_thread_state()
        state = _GRAPHS[gid]
        fn, args, kwargs, refs = state.specs[user_data & _INDEX_MASK]
        prev = getattr(_tls, "ctx", None)
        _tls.ctx = ctx
        try:
            if refs:
                args = list(args)
                kwargs = dict(kwargs)
                for i, (pos, name) in enumerate(refs):
                    v = read_input(ctx, i)
                    if name is None:
                        args[pos] = v
                    else:
                        kwargs[name] = v
            result = fn(*args, **kwargs)
        finally:
            _tls.ctx = prev
        key = _put_value(result)
        st = F.gf_task_ctx_set_value(ctx, 0, key, _DESTROY_ADDR, 0)
        if st != 0:
            _VALUES.pop(key, None)
            raise _error(st)
        return 0
    except BaseException as exc:  # noqa: B036 -- nothing may propagate into C
        try:
            return record_failure(ctx, gid, exc)
        except BaseException:
            return 1


# gpuflow learns durations per body function pointer (for placement by estimated finish time):
# a bank of identical trampolines, picked by the task's Python callable, keeps the estimates of
# different callables apart (up to collisions).
_BANK_SIZE = 32
_PY_BODIES = [F.TASK_FN(_py_body) for _ in range(_BANK_SIZE)]
PY_BODY_ADDRS = tuple(ctypes.cast(b, c_void_p).value for b in _PY_BODIES)


TaskEnv = namedtuple("TaskEnv", "kind device worker attempt name")
TaskEnv.__doc__ = "Where a task body runs: kind 'cpu' or 'gpu', device ordinal (-1 on CPU), " \
                  "worker index, attempt (1 = first), task name."


class TaskContext:
    """What a running task body may ask gpuflow (valid only during that body, on its thread)."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx):
        self._ctx = ctx

    def env(self) -> TaskEnv:
        env = F.gf_task_env()
        env.struct_size = ctypes.sizeof(F.gf_task_env)
        _check(F.gf_task_ctx_env(byref(env), self._ctx))
        name = env.task_name.decode() if env.task_name else ""
        return TaskEnv("gpu" if env.kind == F.GF_WORKER_GPU else "cpu", env.device, env.worker,
                       env.attempt, name)

    def cancelled(self) -> bool:
        return bool(F.gf_task_ctx_cancelled(self._ctx))


def current_task() -> TaskContext | None:
    """The context of the gpuflow task running on this thread, or None outside task bodies."""
    ctx = getattr(_tls, "ctx", None)
    return TaskContext(ctx) if ctx else None


# ------------------------------------------------------------------------------------------
# Pools
# ------------------------------------------------------------------------------------------

WorkerInfo = namedtuple("WorkerInfo", "index kind device threads emulated name")
LedgerEntry = namedtuple("LedgerEntry", "resource capacity in_use peak_in_use")
RunStats = namedtuple("RunStats", "tasks succeeded failed cancelled attempts transfers "
                                  "bytes_transferred elapsed_s")

# The newest gf_pool_config layout the loaded library understands.
_POOL_CONFIG = (F.gf_pool_config_v2
                if F.library_struct_size(F.gf_pool_config_init) >= ctypes.sizeof(F.gf_pool_config_v2)
                else F.gf_pool_config)

_BACKENDS = {"auto": F.GF_BACKEND_AUTO, "host": F.GF_BACKEND_HOST, "cuda": F.GF_BACKEND_CUDA}


def _resource_array(resources: dict | None):
    """(ctypes array of gf_resource, count, keep-alive list) for a {name: amount} mapping."""
    if not resources:
        return None, 0, ()
    names = [str(k).encode() for k in resources]
    arr = (F.gf_resource * len(names))()
    for i, (n, amount) in enumerate(zip(names, resources.values())):
        arr[i].name = n
        arr[i].amount = float(amount)
    return arr, len(names), names


def _destroy_pool(handle):
    if getattr(_tls, "ctx", None):
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

    Use as a context manager, or call close(); a pool left open is closed at interpreter exit.
    """

    def __init__(self, cpu_workers: int | None = None, emulated_devices: int | None = None,
                 device_memory: int | None = None, bandwidth: float | None = None,
                 gpu_worker_threads: int | None = None, cpu_labels: dict | None = None,
                 gpu_labels: dict | None = None, backend: str = "auto",
                 devices=None, device_memory_limit: int | None = None,
                 spill_threshold: float | None = None):
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
        cpu_arr, cpu_n, keep1 = _resource_array(cpu_labels)
        gpu_arr, gpu_n, keep2 = _resource_array(gpu_labels)
        if cpu_n:
            cfg.cpu_worker_labels = cpu_arr
            cfg.cpu_worker_label_count = cpu_n
        if gpu_n:
            cfg.gpu_worker_labels = gpu_arr
            cfg.gpu_worker_label_count = gpu_n
        extra = {"devices": devices, "device_memory_limit": device_memory_limit,
                 "spill_threshold": spill_threshold}
        if any(v is not None for v in extra.values()):
            if _POOL_CONFIG is not F.gf_pool_config_v2:
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
        handle = c_void_p()
        _check(F.gf_pool_create_versioned(byref(handle), byref(cfg), F.GF_VERSION_MAJOR))
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
        """Shuts the pool down: pending tasks are cancelled, running bodies waited for."""
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

    # -- introspection
    def workers(self) -> list[WorkerInfo]:
        n = c_uint32()
        _check(F.gf_pool_worker_count(byref(n), self.handle))
        out = []
        for i in range(n.value):
            info = F.gf_worker_info()
            info.struct_size = ctypes.sizeof(F.gf_worker_info)
            _check(F.gf_pool_worker_info(byref(info), self.handle, i))
            out.append(WorkerInfo(i, "gpu" if info.kind == F.GF_WORKER_GPU else "cpu",
                                  info.device, info.threads, bool(info.emulated),
                                  info.name.decode()))
        return out

    def ledger(self, worker: int) -> dict[str, LedgerEntry]:
        """Worker `worker`'s resource ledger: {resource: LedgerEntry}."""
        n = c_uint32()
        _check(F.gf_pool_ledger_size(byref(n), self.handle, worker))
        out = {}
        for i in range(n.value):
            e = F.gf_ledger_entry()
            e.struct_size = ctypes.sizeof(F.gf_ledger_entry)
            _check(F.gf_pool_ledger_entry(byref(e), self.handle, worker, i))
            name = e.resource.decode()
            out[name] = LedgerEntry(name, e.capacity, e.in_use, e.peak_in_use)
        return out

    # -- running
    def run(self, graph: "Graph") -> "Run":
        """Submits `graph` (it is frozen by the first submit) and returns its Run."""
        return graph.submit(self)

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


# ------------------------------------------------------------------------------------------
# Graphs
# ------------------------------------------------------------------------------------------


class Data:
    """A data object of one graph: a task's output value or a host value."""

    __slots__ = ("graph", "id", "name")

    def __init__(self, graph, id_, name=None):
        self.graph = graph
        self.id = id_
        self.name = name

    def __repr__(self):
        return f"<gpuflow.Data {self.name or self.id}>"


class Task:
    """A task of one graph; ``output`` is the Data holding its return value. Passing a Task (or
    Data) as an argument of another task makes it an input."""

    __slots__ = ("graph", "id", "output", "name", "index")

    def __init__(self, graph, id_, output, name, index):
        self.graph = graph
        self.id = id_
        self.output = output
        self.name = name
        self.index = index

    def __repr__(self):
        return f"<gpuflow.Task {self.name or self.index}>"


_GPU_RESOURCES = ("GPU", "gpu_memory")


def bodies_for(resources, where):
    """(cpu_fn, gpu_fn) presence for a task: GPU requests (or where='gpu') get both bodies."""
    if where is None:
        where = "gpu" if resources and any(r in resources for r in _GPU_RESOURCES) else "cpu"
    if where == "cpu":
        return True, False
    if where == "gpu":
        return True, True  # only GPU workers offer GPU resources; CPU body kept for 'any'
    if where == "any":
        return True, True
    raise ValueError(f"where must be 'cpu', 'gpu', 'any' or None, not {where!r}")


class Graph:
    """A graph of Python tasks, built on one thread, then submitted any number of times."""

    def __init__(self):
        handle = c_void_p()
        _check(F.gf_graph_create(byref(handle)))
        self._handle = handle.value
        self._finalizer = weakref.finalize(self, F.gf_graph_destroy, self._handle)
        self.gid = _next_graph_id()
        if self.gid >> (64 - _INDEX_BITS - 1):
            raise OverflowError("too many graphs")
        self._state = _GraphState(self.gid)
        _GRAPHS[self.gid] = self._state
        anchor = c_uint64()
        st = F.gf_graph_add_host_value(byref(anchor), self._handle, b"gpuflow-python-anchor",
                                       self.gid, _ANCHOR_DESTROY_ADDR, 0)
        if st != 0:
            _GRAPHS.pop(self.gid, None)
            self._finalizer()
            raise _error(st)
        self._desc = F.gf_task_desc()
        self._desc.struct_size = ctypes.sizeof(F.gf_task_desc)
        self._out = c_uint64()
        self._resource_cache = {}
        self.tasks: list[Task] = []

    @property
    def handle(self) -> int:
        if not self._finalizer.alive:
            raise StateError("the graph was destroyed", F.GF_ERR_STATE)
        return self._handle

    def close(self):
        """Drops the graph; runs already submitted keep what they need."""
        self._finalizer()

    def __len__(self):
        n = c_uint64()
        _check(F.gf_graph_task_count(byref(n), self.handle))
        return n.value

    def _resources(self, resources):
        if not resources:
            return None, 0
        key = tuple(sorted((str(k), float(v)) for k, v in resources.items()))
        hit = self._resource_cache.get(key)
        if hit is None:
            arr, n, keep = _resource_array(dict(key))
            hit = (arr, n, keep)
            self._resource_cache[key] = hit
        return ctypes.addressof(hit[0]), hit[1]

    def value(self, obj, name: str | None = None) -> Data:
        """A graph input holding the Python object `obj` (released with the graph)."""
        key = _put_value(obj)
        out = c_uint64()
        st = F.gf_graph_add_host_value(byref(out), self.handle, name.encode() if name else None,
                                       key, _DESTROY_ADDR, _size_estimate(obj))
        if st != 0:
            _VALUES.pop(key, None)
            raise _error(st)
        return Data(self, out.value, name)

    def task(self, fn, *args, resources: dict | None = None, priority: int = 0,
             retries: int = 0, where: str | None = None, name: str | None = None,
             keep: bool = False, after=(), **kwargs) -> Task:
        """Adds a task computing fn(*args, **kwargs). Task or Data arguments (top level of
        args and kwargs) become inputs: the body receives their values.

        resources: {name: amount} held while the body runs, e.g. {"GPU": 1}, {"bigmem": 1}.
        priority: higher runs first among ready tasks. retries: re-runs on failure.
        where: 'cpu', 'gpu' or 'any' worker kinds; default: 'gpu' if resources ask for GPU or
        gpu_memory, else 'cpu'. keep: keep the output after its consumers ran, so
        Run.value() can read it. after: tasks this one runs after (ordering only).
        """
        if not callable(fn):
            raise TypeError(f"{fn!r} is not callable")
        handle = self.handle
        inputs = []
        refs = []
        for pos, a in enumerate(args):
            if isinstance(a, (Task, Data)):
                inputs.append(self._data_of(a))
                refs.append((pos, None))
        for k, v in kwargs.items():
            if isinstance(v, (Task, Data)):
                inputs.append(self._data_of(v))
                refs.append((None, k))
        # the refs entries name where each input goes: (position, None) or (None, keyword)
        refs = tuple((p if p is not None else 0, k) for p, k in refs)
        out = c_uint64()
        _check(F.gf_graph_add_value(byref(out), handle, None, 0, F.GF_DATA_KEEP if keep else 0))
        output = Data(self, out.value, name)
        cpu, gpu = bodies_for(resources, where)
        index = len(self._state.specs)
        if index > _INDEX_MASK:
            raise OverflowError("too many tasks in one graph")
        self._state.specs.append((fn, args, kwargs, refs))
        d = self._desc
        d.name = name.encode() if name else None
        body = PY_BODY_ADDRS[hash(fn) % _BANK_SIZE]
        d.cpu_fn = body if cpu else None
        d.gpu_fn = body if gpu else None
        d.user_data = (self.gid << _INDEX_BITS) | index
        d.resources, d.resource_count = self._resources(resources)
        d.priority = int(priority)
        d.retries = int(retries)
        in_arr = (c_uint64 * len(inputs))(*inputs) if inputs else None
        d.inputs = ctypes.addressof(in_arr) if inputs else None
        d.input_count = len(inputs)
        out_arr = (c_uint64 * 1)(out.value)
        d.outputs = ctypes.addressof(out_arr)
        d.output_count = 1
        after_ids = [t.id for t in after]
        after_arr = (c_uint64 * len(after_ids))(*after_ids) if after_ids else None
        d.after = ctypes.addressof(after_arr) if after_ids else None
        d.after_count = len(after_ids)
        tid = c_uint64()
        st = F.gf_graph_add_task(byref(tid), handle, byref(d))
        if st != 0:
            self._state.specs[index] = None
            raise _error(st)
        t = Task(self, tid.value, output, name, index)
        self.tasks.append(t)
        return t

    def _data_of(self, a) -> int:
        if a.graph is not self:
            raise ValueError(f"{a!r} belongs to another graph")
        return a.output.id if isinstance(a, Task) else a.id

    def after(self, task: Task, before: Task):
        """Adds an ordering edge: `task` runs after `before`."""
        _check(F.gf_graph_add_dependency(self.handle, task.id, before.id))

    def submit(self, pool: Pool) -> "Run":
        """Validates the graph against `pool` and starts running it."""
        run = c_void_p()
        _check(F.gf_graph_submit(byref(run), pool.handle, self.handle, None))
        return Run(run.value, self._state, pool)


def _size_estimate(obj) -> int:
    n = getattr(obj, "nbytes", 0)
    return n if type(n) is int and n > 0 else 0


# ------------------------------------------------------------------------------------------
# Runs and futures
# ------------------------------------------------------------------------------------------

_WAIT_SLICE_MS = 100  # how often a waiting main thread looks at signals (Ctrl-C)
_STATE_NAMES = {F.GF_RUN_RUNNING: "running", F.GF_RUN_SUCCEEDED: "succeeded",
                F.GF_RUN_FAILED: "failed", F.GF_RUN_CANCELLED: "cancelled"}
_TASK_STATE_NAMES = {F.GF_TASK_WAITING: "waiting", F.GF_TASK_QUEUED: "queued",
                     F.GF_TASK_RUNNING: "running", F.GF_TASK_SUCCEEDED: "succeeded",
                     F.GF_TASK_FAILED: "failed", F.GF_TASK_CANCELLED: "cancelled"}


def wait_run(handle: int, timeout: float | None = None) -> int:
    """gf_run_wait in slices (GIL released in each), so that KeyboardInterrupt can interrupt it:
    on Ctrl-C the run is cancelled, its running bodies finish, and the interrupt is re-raised.
    Returns the final gf_status, or GF_TIMEOUT."""
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            if deadline is None:
                slice_ms = _WAIT_SLICE_MS
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    return F.gf_run_poll(handle)
                slice_ms = max(1, min(_WAIT_SLICE_MS, int(left * 1000)))
            st = F.gf_run_wait(handle, slice_ms)
            if st != F.GF_TIMEOUT:
                return st
    except KeyboardInterrupt:
        F.gf_run_cancel(handle)
        while F.gf_run_wait(handle, _WAIT_SLICE_MS) == F.GF_TIMEOUT:
            pass
        raise


def failure_exception(status: int, message: str, state: _GraphState | None):
    """The exception to raise for a finished run: the task's original Python exception when the
    message carries one of its tokens, else the GpuflowError for the status."""
    if status == F.GF_ERR_TASK_FAILED and state is not None:
        m = _EXC_TOKEN.search(message)
        if m:
            exc = state.exceptions.get(int(m.group(1)))
            if exc is not None:
                return exc
    return _error(status, message)


class Run:
    """One execution of a graph on a pool: a future. Use as a context manager (or close()) to
    release it early; it is released when garbage collected otherwise."""

    def __init__(self, handle: int, state: _GraphState, pool: Pool | None = None):
        self._handle = handle
        self._state = state  # keeps the graph's table (and exceptions) reachable
        self._pool = pool
        self._finalizer = weakref.finalize(self, F.gf_run_destroy, handle)
        self._outcome = None  # (status, message) once finished

    @property
    def handle(self) -> int:
        if not self._finalizer.alive:
            raise StateError("the run was closed", F.GF_ERR_STATE)
        return self._handle

    def close(self):
        """Cancels the run if still running and releases it (and the values it holds)."""
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def wait(self, timeout: float | None = None) -> bool:
        """Waits for the run to finish; True when finished, False on timeout."""
        if self._outcome is not None:
            return True
        st = wait_run(self.handle, timeout)
        if st == F.GF_TIMEOUT:
            return False
        self._outcome = (st, F.last_error() if st < 0 else "")
        return True

    def done(self) -> bool:
        return self._outcome is not None or F.gf_run_poll(self.handle) != F.GF_TIMEOUT

    def cancel(self):
        _check(F.gf_run_cancel(self.handle))

    def result(self, timeout: float | None = None):
        """Waits; raises the first failed task's original exception (or a GpuflowError such as
        CancelledError); returns None when every task succeeded."""
        if not self.wait(timeout):
            raise TimeoutError(f"the run did not finish within {timeout} s")
        st, message = self._outcome
        if st < 0:
            raise failure_exception(st, message, self._state)

    def exception(self, timeout: float | None = None):
        try:
            self.result(timeout)
        except TimeoutError:
            raise
        except BaseException as e:  # noqa: B036
            return e
        return None

    @property
    def state(self) -> str:
        s = c_int()
        _check(F.gf_run_state_get(byref(s), self.handle))
        return _STATE_NAMES.get(s.value, str(s.value))

    def value(self, item):
        """The Python value of a Task's output or a Data object (kept, or consumed by nobody)."""
        d = item.output.id if isinstance(item, Task) else item.id
        p = c_void_p()
        _check(F.gf_run_value(byref(p), self.handle, d))
        return _VALUES[p.value]

    __getitem__ = value

    def fileno(self) -> int:
        """A descriptor that becomes readable once the run finished (for selectors/asyncio)."""
        fd = c_int()
        _check(F.gf_run_fd(byref(fd), self.handle))
        return fd.value

    def __await__(self):
        import asyncio
        loop = asyncio.get_running_loop()
        if not self.done():
            fut = loop.create_future()
            fd = self.fileno()
            loop.add_reader(fd, lambda: fut.done() or fut.set_result(None))
            try:
                yield from fut.__await__()
            finally:
                loop.remove_reader(fd)
        return self.result()

    def task_state(self, task: Task) -> str:
        s = c_int()
        _check(F.gf_run_task_state(byref(s), self.handle, task.id))
        return _TASK_STATE_NAMES.get(s.value, str(s.value))

    def task_error(self, task: Task) -> str:
        p = c_char_p()
        _check(F.gf_run_task_error(byref(p), self.handle, task.id))
        return (p.value or b"").decode("utf-8", "replace")

    def task_attempts(self, task: Task) -> int:
        n = c_uint32()
        _check(F.gf_run_task_attempts(byref(n), self.handle, task.id))
        return n.value

    def task_worker(self, task: Task) -> int:
        n = c_uint32()
        _check(F.gf_run_task_worker(byref(n), self.handle, task.id))
        return n.value

    def stats(self) -> RunStats:
        s = F.gf_run_stats()
        s.struct_size = ctypes.sizeof(F.gf_run_stats)
        _check(F.gf_run_stats_get(byref(s), self.handle))
        return RunStats(s.tasks, s.succeeded, s.failed, s.cancelled, s.attempts, s.transfers,
                        s.bytes_transferred, s.elapsed_s)


class Future:
    """The result of one task of a run (what Pool.submit returns)."""

    __slots__ = ("run", "task")

    def __init__(self, run: Run, task: Task):
        self.run = run
        self.task = task

    def result(self, timeout: float | None = None):
        """Waits; returns the task's value or raises its original exception."""
        if not self.run.wait(timeout):
            raise TimeoutError(f"the task did not finish within {timeout} s")
        st = self.run.task_state(self.task)
        if st == "succeeded":
            return self.run.value(self.task)
        self.run.result()  # raises the run's first failure
        raise _error(F.GF_ERR_TASK_FAILED, self.run.task_error(self.task))

    def done(self) -> bool:
        return self.run.done()

    def cancel(self):
        self.run.cancel()

    def exception(self, timeout: float | None = None):
        try:
            self.result(timeout)
        except TimeoutError:
            raise
        except BaseException as e:  # noqa: B036
            return e
        return None

    def __repr__(self):
        return f"<gpuflow.Future {self.task!r}>"
