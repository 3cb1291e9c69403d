"""Pools, graphs, runs and futures over the C ABI (see include/gpuflow.h): the public names,
gathered from the modules that implement them (gpuflow/__init__.py imports them from here).

Modules, lowest first (each imports only those above it, so there is no import circle):

- ``_ffi``: the library and its C declarations.
- ``_errors``: one exception class per gf_status; check/status_error; version().
- ``_values``: Python objects owned by gpuflow through an integer key (VALUES, put_value);
  sizes and spill/unspill of results produced on GPU workers (register_spillable).
- ``_bodies``: the one task-body trampoline run on worker threads for every Python task (of
  Graph.task and of gpuflow.dask), the per-graph BodyTable it reads, cost keys, the exceptions
  of failed tasks, TaskContext/current_task.
- ``_run``: Run, Future and interruptible waiting.
- ``_graph``: Graph, Task, Data and building tasks.
- ``_pool``: Pool.

gpuflow.dask uses the internal API these modules name in their ``__all__`` (no private names).

Ownership rules implemented there (docs/threading.md):
- Python objects handed to gpuflow (task results, host values) live in ``VALUES`` under an
  integer key; that key is the opaque ``void *`` gpuflow stores. gpuflow calls the destructor
  exactly once when it frees the data, which drops the entry. No Py_IncRef games.
- Task bodies are one module-level CFUNCTYPE trampoline; ``user_data`` encodes (table id, body
  index) into the graph's BodyTable. Each C graph owns one host value (the "anchor") whose
  destructor drops its table once the graph and every run of it are gone, so the table
  (callables, arguments, exceptions of failed tasks) lives exactly as long as C can call a body.
  Tasks tell gpuflow what kind of work they are by their cost key (gf_task_desc.cost_key), so
  one trampoline does not mix the duration estimates of different callables.
- A failing body keeps its exception in the table under its body index and fails the attempt
  with the exception's text (no internal tags); Run.result() re-raises the exception of the
  first task that failed in the run.
- Every CFUNCTYPE object is module-level, hence referenced for the life of the interpreter.
- Pools, graphs and runs are released by ``weakref.finalize``, which also runs them at exit
  before the interpreter finalizes (runs first, then pools: reverse creation order), so no
  worker thread is left waiting for the GIL of a dead interpreter.
- Waiting uses gf_run_wait in slices with the GIL released (ctypes.CDLL), so Ctrl-C interrupts
  it: the run is cancelled and KeyboardInterrupt re-raised.
"""
from __future__ import annotations

from ._bodies import TaskContext, TaskEnv, current_task
from ._errors import (CancelledError, GpuflowError, InfeasibleError, InternalError,
                      InvalidArgumentError, InvalidGraphError, InvalidHandleError, NotFoundError,
                      OutOfMemoryError, ShutDownError, StateError, StructSizeError,
                      SystemCallError, TaskFailedError, VersionMismatchError, version)
from ._graph import Data, Graph, Task
from ._pool import DeviceMemory, LedgerEntry, Pool, WorkerInfo
from ._run import Future, Run, RunStats
from ._values import live_values, register_spillable

__all__ = [
    "GpuflowError", "InvalidArgumentError", "InvalidHandleError", "StructSizeError",
    "VersionMismatchError", "InvalidGraphError", "InfeasibleError", "OutOfMemoryError",
    "TaskFailedError", "CancelledError", "StateError", "NotFoundError", "ShutDownError",
    "SystemCallError", "InternalError", "Pool", "Graph", "Task", "Data", "Run", "Future",
    "WorkerInfo", "LedgerEntry", "DeviceMemory", "TaskEnv", "TaskContext", "RunStats",
    "current_task", "live_values", "register_spillable", "version",
]
