"""Runs and futures: waiting for a submitted graph (interruptibly) and reading its results.

Waiting uses gf_run_wait in slices with the GIL released (ctypes.CDLL), so Ctrl-C interrupts
it: the run is cancelled and KeyboardInterrupt re-raised at once, without waiting for the bodies
still running (their results are dropped). Runs are released by ``weakref.finalize``, which also
runs them at exit before the interpreter finalizes.

An interrupted run whose bodies may still be running is "abandoned": its handle is kept (not
destroyed) until its pool is closed, so that the pool can tell whether bodies are still running.
At interpreter exit, a pool with an abandoned run still running is not destroyed (gf_pool_destroy
would wait for those bodies, possibly for minutes): the process exits without joining its
workers, and a body still running is then treated like a daemon thread's code.
"""
from __future__ import annotations

import atexit
import ctypes
import sys
import time
import weakref
from collections import namedtuple
from ctypes import byref, c_char_p, c_int, c_uint32, c_void_p

from . import _ffi as F
from ._bodies import BodyTable, current_ctx, failure_exception
from ._errors import StateError, check, status_error
from ._progress import watcher
from ._values import VALUES


RunStats = namedtuple("RunStats", "tasks succeeded failed cancelled attempts transfers "
                                  "bytes_transferred elapsed_s")

WAIT_SLICE_MS = 100  # how often a waiting main thread looks at signals (Ctrl-C)
_STATE_NAMES = {F.GF_RUN_RUNNING: "running", F.GF_RUN_SUCCEEDED: "succeeded",
                F.GF_RUN_FAILED: "failed", F.GF_RUN_CANCELLED: "cancelled"}
_TASK_STATE_NAMES = {F.GF_TASK_WAITING: "waiting", F.GF_TASK_QUEUED: "queued",
                     F.GF_TASK_RUNNING: "running", F.GF_TASK_SUCCEEDED: "succeeded",
                     F.GF_TASK_FAILED: "failed", F.GF_TASK_CANCELLED: "cancelled"}


# Abandoned runs: run handle -> pool handle, for runs interrupted while bodies may still run.
# Their handles stay valid (not destroyed) until reap_abandoned(pool) destroys them.
_ABANDONED: dict[int, int] = {}


_exiting = False


def _set_exiting():
    global _exiting
    _exiting = True


# weakref.finalize registers its atexit hook (which runs the finalizers of runs and pools) when
# the first finalizer is made; make sure it is registered before ours, so that ours (atexit runs
# hooks last registered first) marks the exit before any of those finalizers runs.
_ALWAYS = type("_Always", (), {})()
weakref.finalize(_ALWAYS, int)
atexit.register(_set_exiting)


def interpreter_exiting() -> bool:
    """Whether the interpreter is exiting (atexit hooks running, or finalizing)."""
    return _exiting or sys.is_finalizing()


def abandon_run(handle: int, pool_handle: int | None) -> None:
    """Records an interrupted (cancelled) run whose bodies may still be running: its handle is
    destroyed by reap_abandoned instead of when its Run is released."""
    if pool_handle is not None:
        _ABANDONED[handle] = pool_handle


def _destroy_run(handle):
    if handle in _ABANDONED:
        if F.gf_run_poll(handle) == F.GF_TIMEOUT:
            return  # bodies still running: reap_abandoned destroys it with its pool
        del _ABANDONED[handle]
    F.gf_run_destroy(handle)


def reap_abandoned(pool_handle: int, exiting: bool) -> bool:
    """Destroys the abandoned runs of a pool about to be destroyed. At exit, returns False (and
    keeps them) when one of them still has bodies running: the pool must then not be destroyed,
    since gf_pool_destroy would wait for those bodies."""
    mine = [r for r, p in _ABANDONED.items() if p == pool_handle]
    if exiting and any(F.gf_run_poll(r) == F.GF_TIMEOUT for r in mine):
        return False
    for r in mine:
        del _ABANDONED[r]
        F.gf_run_destroy(r)
    return True


def run_stats(handle: int) -> RunStats:
    s = F.gf_run_stats()
    s.struct_size = ctypes.sizeof(F.gf_run_stats)
    check(F.gf_run_stats_get(byref(s), handle))
    return RunStats(s.tasks, s.succeeded, s.failed, s.cancelled, s.attempts, s.transfers,
                    s.bytes_transferred, s.elapsed_s)


def run_watcher(handle: int, progress):
    """The progress display of a wait on run `handle` (see gpuflow._progress), or None."""
    if progress is False:
        return None
    if progress is None and current_ctx():
        return None  # a body waiting on another run: the outer wait's bar speaks for it
    return watcher(lambda: run_stats(handle), progress)


def wait_run(handle: int, timeout: float | None = None, pool_handle: int | None = None,
             progress=False) -> int:
    """gf_run_wait in slices (GIL released in each), so that KeyboardInterrupt can interrupt it:
    on Ctrl-C the run is cancelled and the interrupt re-raised at once; bodies still running are
    not waited for (the run is abandoned, see the module documentation, when `pool_handle` is
    given). Between slices, shows the run's progress as `progress` (None: auto, True, False)
    asks. Returns the final gf_status, or GF_TIMEOUT."""
    deadline = None if timeout is None else time.monotonic() + timeout
    shown = None
    try:
        while True:
            if deadline is None:
                slice_ms = WAIT_SLICE_MS
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    return F.gf_run_poll(handle)
                slice_ms = max(1, min(WAIT_SLICE_MS, int(left * 1000)))
            st = F.gf_run_wait(handle, slice_ms)
            if st != F.GF_TIMEOUT:
                if progress is True and shown is None:  # forced on: a final line, however short
                    shown = run_watcher(handle, True)
                return st
            if progress is not False:
                # Made once the run is seen running: in auto, a finished run shows nothing.
                if shown is None:
                    shown = run_watcher(handle, progress)
                    progress = progress if shown is not None else False
                if shown is not None:
                    shown.tick()
    except KeyboardInterrupt:
        interrupted(handle, pool_handle)
        raise
    finally:
        if shown is not None:
            shown.close()  # ends the line, also on timeout and Ctrl-C


def interrupted(handle: int, pool_handle: int | None) -> None:
    """What a wait does on KeyboardInterrupt: cancel the run; if bodies are still running,
    abandon it (do not wait for them)."""
    F.gf_run_cancel(handle)
    if F.gf_run_poll(handle) == F.GF_TIMEOUT:
        abandon_run(handle, pool_handle)


class Run:
    """One execution of a graph on a pool: a future. Use as a context manager (or close()) to
    release it early; it is released when garbage collected otherwise.

    ``progress``: whether waiting for it (wait, result, a Future's result) shows a progress
    bar on stderr: None (the default) when interactive and the run lasts over a second, True
    always, False never; see gpuflow._progress."""

    def __init__(self, handle: int, table: BodyTable, pool=None, progress=None):
        self._handle = handle
        self.progress = progress
        self._table = table  # keeps the graph's bodies (and their exceptions) reachable
        self._pool = pool
        self._pool_handle = getattr(pool, "_handle", None)
        self._finalizer = weakref.finalize(self, _destroy_run, handle)
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
        st = wait_run(self.handle, timeout, self._pool_handle, self.progress)
        if st == F.GF_TIMEOUT:
            return False
        self._outcome = (st, F.last_error() if st < 0 else "")
        return True

    def done(self) -> bool:
        return self._outcome is not None or F.gf_run_poll(self.handle) != F.GF_TIMEOUT

    def cancel(self):
        check(F.gf_run_cancel(self.handle))

    def result(self, timeout: float | None = None):
        """Waits; raises the first failed task's original exception (or a GpuflowError such as
        CancelledError); returns None when every task succeeded."""
        if not self.wait(timeout):
            raise TimeoutError(f"the run did not finish within {timeout} s")
        st, message = self._outcome
        if st < 0:
            handle = self._handle if self._finalizer.alive else None
            raise failure_exception(st, message, self._table, handle)

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
        check(F.gf_run_state_get(byref(s), self.handle))
        return _STATE_NAMES.get(s.value, str(s.value))

    def value(self, item):
        """The Python value of a Task's output or a Data object (kept, or consumed by nobody)."""
        output = getattr(item, "output", None)  # a Task; a Data object has none
        d = output.id if output is not None else item.id
        p = c_void_p()
        check(F.gf_run_value(byref(p), self.handle, d))
        return VALUES[p.value]

    __getitem__ = value

    def fileno(self) -> int:
        """A descriptor that becomes readable once the run finished (for selectors/asyncio)."""
        fd = c_int()
        check(F.gf_run_fd(byref(fd), self.handle))
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

    def task_state(self, task) -> str:
        s = c_int()
        check(F.gf_run_task_state(byref(s), self.handle, task.id))
        return _TASK_STATE_NAMES.get(s.value, str(s.value))

    def task_error(self, task) -> str:
        p = c_char_p()
        check(F.gf_run_task_error(byref(p), self.handle, task.id))
        return (p.value or b"").decode("utf-8", "replace")

    def task_attempts(self, task) -> int:
        n = c_uint32()
        check(F.gf_run_task_attempts(byref(n), self.handle, task.id))
        return n.value

    def task_worker(self, task) -> int:
        n = c_uint32()
        check(F.gf_run_task_worker(byref(n), self.handle, task.id))
        return n.value

    def stats(self) -> RunStats:
        return run_stats(self.handle)


class Future:
    """The result of one task of a run (what Pool.submit returns)."""

    __slots__ = ("run", "task")

    def __init__(self, run: Run, task):
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
        raise status_error(F.GF_ERR_TASK_FAILED, self.run.task_error(self.task))

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
