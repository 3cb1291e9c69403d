"""Task bodies: one trampoline for every Python task, called by gpuflow's worker threads.

``user_data`` encodes (graph id, task index) into the per-graph table ``_GRAPHS``. Each C graph
owns one host value (the "anchor") whose destructor removes its table once the graph and every
run of it are gone, so the table (callables, arguments, recorded exceptions) lives exactly as
long as C can call a body. Every CFUNCTYPE object here is module-level, hence referenced for the
life of the interpreter.

A failing body records its exception in the table under a token that it writes into the failure
message; failure_exception() finds it again when the run reports that message.
"""
from __future__ import annotations

import ctypes
import itertools
import re
import threading
import traceback
from collections import namedtuple
from ctypes import byref, c_int, c_uint64, c_void_p

from . import _ffi as F
from ._errors import _check, _error
from ._values import _DESTROY_ADDR, _VALUES, _put_value

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
