"""Pools, graphs, runs and futures over the C ABI (see include/gpuflow.h).

The implementation is split by responsibility; this module re-exports it, so that
``gpuflow._core`` keeps offering every name it always did (gpuflow/__init__.py, gpuflow/dask.py
and tests import from here):

- ``_errors``: one exception class per gf_status; _error/_check; version().
- ``_values``: Python objects owned by gpuflow through an integer key (_VALUES, _DESTROY).
- ``_bodies``: the task-body trampoline run on worker threads, the per-graph tables
  (_GRAPHS) it reads, recorded exceptions, TaskContext/current_task.
- ``_graph``: Graph, Task, Data and building tasks.
- ``_run``: Run, Future and interruptible waiting.
- ``_pool``: Pool.

Ownership rules implemented there (docs/threading.md):
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

# The private names below are used by gpuflow.dask (its own task bodies) and by tests.
from ._bodies import (_BANK_SIZE, _EXC_TOKEN, _GRAPHS, _INDEX_BITS, _INDEX_MASK,  # noqa: F401
                      PY_BODY_ADDRS, TaskContext, TaskEnv, _GraphState, _scratch, _tls,
                      current_task, failure_exception, pin_thread_state, read_input,
                      record_failure)
from ._errors import (CancelledError, GpuflowError, InfeasibleError,  # noqa: F401
                      InternalError, InvalidArgumentError, InvalidGraphError,
                      InvalidHandleError, NotFoundError, OutOfMemoryError, ShutDownError,
                      StateError, StructSizeError, SystemCallError, TaskFailedError,
                      VersionMismatchError, _check, _error, version)
from ._graph import Data, Graph, Task, _resource_array, bodies_for  # noqa: F401
from ._pool import LedgerEntry, Pool, WorkerInfo  # noqa: F401
from ._run import Future, Run, RunStats, wait_run  # noqa: F401
from ._values import (_DESTROY, _DESTROY_ADDR, _VALUES, _next_value_key,  # noqa: F401
                      _put_value, live_values)

__all__ = [
    "GpuflowError", "InvalidArgumentError", "InvalidHandleError", "StructSizeError",
    "VersionMismatchError", "InvalidGraphError", "InfeasibleError", "OutOfMemoryError",
    "TaskFailedError", "CancelledError", "StateError", "NotFoundError", "ShutDownError",
    "SystemCallError", "InternalError", "Pool", "Graph", "Task", "Data", "Run", "Future",
    "WorkerInfo", "LedgerEntry", "TaskEnv", "RunStats", "current_task", "version",
]
