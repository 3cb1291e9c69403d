"""Task bodies: the one trampoline that runs every Python task (Graph.task and gpuflow.dask),
called by gpuflow's worker threads.

A graph's Python side is a BodyTable: per task index, what its body computes, plus the
exception of its last failed attempt. ``user_data`` encodes (table id, task index). Each C graph
owns one host value (the "anchor") whose destructor drops its table once the graph and every run
of it are gone, so the table lives exactly as long as C can call a body. Every CFUNCTYPE object
here is module-level, hence referenced for the life of the interpreter.

Every body is the same C function (BODY_ADDR; GPU_BODY_ADDR for gpu_fn, which hands the
result to gpuflow as device data charged to the device: see gpuflow._values), so gpuflow tells
kinds of work apart by the task's cost key (gf_task_desc.cost_key): the callable's qualified
name for Graph.task, the key prefix for Dask. Tasks with the same key share one learnt duration estimate.

This module is the binding's internal API for task bodies; gpuflow.dask builds on it.
"""
from __future__ import annotations

import ctypes
import functools
import itertools
import threading
import traceback
from collections import namedtuple
from ctypes import byref, c_int, c_uint64, c_void_p

from . import _ffi as F
from ._errors import check, status_error
from ._values import DESTROY_VALUE_ADDR, VALUES, device_value_ops, put_value, value_size

__all__ = ["BODY_ADDR", "GPU_BODY_ADDR", "HAS_COST_KEY", "TASK_DESC", "BodyTable", "TaskContext",
           "TaskEnv",
           "cost_key_of", "cost_key_text", "current_ctx", "current_task", "failure_exception",
           "input_value", "live_tables"]

_TABLES: dict[int, "BodyTable"] = {}
_next_table_id = itertools.count(1).__next__
_INDEX_BITS = 32
_INDEX_MASK = (1 << _INDEX_BITS) - 1
_tls = threading.local()

# The gf_task_desc layout to fill: with cost_key when the library knows it.
TASK_DESC = F.task_desc_layout()
HAS_COST_KEY = TASK_DESC is F.gf_task_desc_v2


def _drop_table(tid):
    _TABLES.pop(tid, None)


_ANCHOR_DESTROY = F.DESTROY_FN(_drop_table)
_ANCHOR_DESTROY_ADDR = ctypes.cast(_ANCHOR_DESTROY, c_void_p).value
_next_failure = itertools.count(1).__next__


class BodyTable:
    """What the bodies of one C graph run, by body index (the order add() was called).

    ``add(compute, payload)`` registers the next task: its body calls ``compute(ctx, payload)``
    on a worker thread (with current_task() set) and stores the return value as the task's
    output value. It returns the ``user_data`` of the task's gf_task_desc, whose cpu_fn / gpu_fn
    are BODY_ADDR. ``added(task_id)`` records the gf_task once gpuflow accepted it; ``discard()``
    forgets the last add() when it did not.
    """

    __slots__ = ("id", "bodies", "task_ids", "exceptions", "_base", "__weakref__")

    def __init__(self, graph_handle: int):
        self.id = _next_table_id()
        if self.id >> (64 - _INDEX_BITS - 1):
            raise OverflowError("too many graphs")
        self._base = self.id << _INDEX_BITS
        self.bodies = []       # (compute, payload) by body index (user_data)
        self.task_ids = []     # gf_task ids by body index (0 until gpuflow accepted the task)
        self.exceptions = {}   # body index -> (failure order, exception of its last failure)
        _TABLES[self.id] = self
        anchor = c_uint64()
        st = F.gf_graph_add_host_value(byref(anchor), graph_handle, b"gpuflow-python-anchor",
                                       self.id, _ANCHOR_DESTROY_ADDR, 0)
        if st != 0:
            _TABLES.pop(self.id, None)
            raise status_error(st)

    def add(self, compute, payload) -> int:
        index = len(self.bodies)
        if index > _INDEX_MASK:
            raise OverflowError("too many tasks in one graph")
        self.bodies.append((compute, payload))
        self.task_ids.append(0)
        return self._base | index

    def added(self, task_id: int):
        self.task_ids[-1] = task_id

    def discard(self):
        self.bodies.pop()
        self.task_ids.pop()


def live_tables() -> int:
    """How many graphs' body tables are alive (for leak checks in tests)."""
    return len(_TABLES)


def _failure_text(exc: BaseException) -> str:
    try:
        return "".join(traceback.format_exception_only(type(exc), exc)).strip()
    except BaseException:  # a broken __str__ must not escape into C
        return type(exc).__name__


def _record_failure(ctx, table, index: int, exc: BaseException) -> int:
    """Keeps exc as the task's last failure and fails the attempt with its text; returns 1."""
    if table is not None:
        table.exceptions[index] = (_next_failure(), exc)
    F.gf_task_ctx_fail(ctx, _failure_text(exc).encode("utf-8", "replace"))
    return 1


def _scratch():
    """A per-thread pair of out-parameters for gf_task_ctx_input: (buffer, ptr address)."""
    try:
        return _tls.scratch
    except AttributeError:
        buf = (c_uint64 * 2)()
        _tls.scratch = s = (buf, ctypes.addressof(buf), ctypes.addressof(buf) + 8)
        return s


def input_value(ctx, index: int):
    """The Python object of opaque-value input `index` of the running task."""
    buf, p_addr, s_addr = _scratch()
    st = F.gf_task_ctx_input(p_addr, s_addr, ctx, index)
    if st != 0:
        raise status_error(st)
    return VALUES[buf[0]]


_PyGILState_Ensure = ctypes.pythonapi.PyGILState_Ensure
_PyGILState_Ensure.restype = c_int
_PyGILState_Ensure.argtypes = ()


def _pin_thread_state():
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


_set_value = F.gf_task_ctx_set_value
_set_device_value = F.gf_task_ctx_set_device_value


def _body(ctx, user_data, on_gpu=False):
    """The body of every Python task: look up what it computes, run it, store the result (on a
    GPU worker as device data of its size, with the spill/unspill pair of its kind)."""
    table = None
    index = user_data & _INDEX_MASK
    try:
        if not hasattr(_tls, "pinned"):
            _pin_thread_state()
        table = _TABLES[user_data >> _INDEX_BITS]
        compute, payload = table.bodies[index]
        prev = getattr(_tls, "ctx", None)
        _tls.ctx = ctx
        try:
            result = compute(ctx, payload)
        finally:
            _tls.ctx = prev
        key = put_value(result)
        if on_gpu and _set_device_value is not None:
            st = _set_device_value(ctx, 0, key, DESTROY_VALUE_ADDR, value_size(result),
                                   device_value_ops(result))
        else:
            st = _set_value(ctx, 0, key, DESTROY_VALUE_ADDR, 0)
        if st != 0:
            VALUES.pop(key, None)
            raise status_error(st)
        return 0
    except BaseException as exc:  # noqa: B036 -- nothing may propagate into C
        try:
            return _record_failure(ctx, table, index, exc)
        except BaseException:
            return 1


def _gpu_body(ctx, user_data):
    return _body(ctx, user_data, True)


_BODY = F.TASK_FN(_body)
BODY_ADDR = ctypes.cast(_BODY, c_void_p).value
_GPU_BODY = F.TASK_FN(_gpu_body)
GPU_BODY_ADDR = ctypes.cast(_GPU_BODY, c_void_p).value

_MAX_COST_KEY = 4096  # bytes (gf_task_desc.cost_key)


def cost_key_text(text: str) -> bytes:
    """text as a valid cost key: UTF-8 without control characters, 1 to 4096 bytes."""
    text = "".join(c if c.isprintable() else "?" for c in text) or "?"
    b = text.encode("utf-8", "replace")
    if len(b) > _MAX_COST_KEY:
        b = b[:_MAX_COST_KEY].decode("utf-8", "ignore").encode()
    return b


@functools.lru_cache(maxsize=4096)
def _key_of_name(module: str, qualname: str, line: int) -> bytes:
    key = f"{module}.{qualname}" if module else qualname
    return cost_key_text(f"{key}:{line}" if line else key)


def cost_key_of(fn) -> bytes:
    """The cost key of a Python callable: its module and qualified name ("pkg.mod.Class.method");
    for a lambda also its first line (two lambdas of one function are different work); for a
    functools.partial, the function it wraps; for another callable object, its class."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    qualname = getattr(fn, "__qualname__", None)
    if not isinstance(qualname, str):
        fn = type(fn)
        qualname = fn.__qualname__
    module = getattr(fn, "__module__", None)
    line = 0
    if qualname.endswith("<lambda>"):
        code = getattr(fn, "__code__", None)
        line = getattr(code, "co_firstlineno", 0)
    return _key_of_name(module if isinstance(module, str) else "", qualname, line)


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
        check(F.gf_task_ctx_env(byref(env), self._ctx))
        name = env.task_name.decode() if env.task_name else ""
        return TaskEnv("gpu" if env.kind == F.GF_WORKER_GPU else "cpu", env.device, env.worker,
                       env.attempt, name)

    def cancelled(self) -> bool:
        return bool(F.gf_task_ctx_cancelled(self._ctx))


def current_ctx():
    """The gf_task_ctx of the gpuflow task running on this thread, or None."""
    return getattr(_tls, "ctx", None)


def current_task() -> TaskContext | None:
    """The context of the gpuflow task running on this thread, or None outside task bodies."""
    ctx = getattr(_tls, "ctx", None)
    return TaskContext(ctx) if ctx else None


def failure_exception(status: int, message: str, table: BodyTable | None,
                      run_handle: int | None):
    """The exception to raise for a finished run: when tasks failed, the Python exception of the
    first of them to fail (in the run), else the GpuflowError for the status."""
    if (status == F.GF_ERR_TASK_FAILED and table is not None and table.exceptions
            and run_handle is not None):
        state = c_int()
        ids = table.task_ids
        for index, (_, exc) in sorted(table.exceptions.items(), key=lambda kv: kv[1][0]):
            st = F.gf_run_task_state(byref(state), run_handle, ids[index])
            if st == 0 and state.value == F.GF_TASK_FAILED:
                return exc
    return status_error(status, message)
