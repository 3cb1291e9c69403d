"""gpuflow: run annotated task graphs on a shared pool of CPU workers and (real or emulated)
GPUs, from Python. A ctypes binding of the C ABI (include/gpuflow.h): no build step.

    import gpuflow
    with gpuflow.Pool(cpu_workers=2) as pool:
        print(pool.submit(lambda: 10 + 1).result())          # 11

        g = gpuflow.Graph()
        a = g.task(make_data)
        b = g.task(process, a, resources={"GPU": 1})          # runs on a GPU worker
        c = g.task(summarize, b)
        run = pool.run(g)
        run.result()                                          # raises the task's exception
        print(run.value(c))

The Dask scheduler is ``gpuflow.dask.get`` (``dask.compute(x, scheduler=gpuflow.dask.get)``).
The shared library is found through GPUFLOW_LIBRARY (see gpuflow._ffi).
"""
from ._core import (CancelledError, Data, DeviceMemory, Future, GpuflowError, Graph, InfeasibleError,
                    InternalError, InvalidArgumentError, InvalidGraphError, InvalidHandleError,
                    LedgerEntry, NotFoundError, OutOfMemoryError, Pool, Run, RunStats,
                    ShutDownError, StateError, StructSizeError, SystemCallError, Task,
                    TaskContext, TaskEnv, TaskFailedError, VersionMismatchError, WorkerInfo,
                    current_task, live_values, register_spillable, version)
from ._ffi import library_path
from ._lease import Lease, LeasedDevice, client_endpoint, default_endpoint
from ._service import Service

__version__ = "0.10.0"

__all__ = [
    "CancelledError", "Data", "DeviceMemory", "Future", "GpuflowError", "Graph", "InfeasibleError",
    "InternalError", "InvalidArgumentError", "InvalidGraphError", "InvalidHandleError",
    "Lease", "LeasedDevice", "LedgerEntry", "NotFoundError", "OutOfMemoryError", "Pool", "Run",
    "RunStats", "Service", "ShutDownError", "StateError", "StructSizeError", "SystemCallError", "Task", "TaskContext",
    "TaskEnv", "TaskFailedError", "VersionMismatchError", "WorkerInfo", "current_task",
    "client_endpoint", "default_endpoint", "library_path", "live_values", "register_spillable",
    "version",
]
