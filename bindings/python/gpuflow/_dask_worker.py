"""``python -m gpuflow.dask worker SCHEDULER_ADDRESS`` (console script ``gpuflow-dask-worker``):
Dask workers for one node, each on devices leased from the node's gpuflow service — what
``dask-cuda-worker SCHEDULER_ADDRESS`` is for dask-cuda, without taking devices that a Snakemake
job, another Dask cluster or any other program on the node holds.

It starts one GPUNanny per worker; each waits its turn for its lease (fair share with everything
else on the node) and then starts its worker process. SIGTERM or Ctrl-C closes the workers and
hands the devices back; so does the scheduler going away. A kill -9 hands them back too (the
service sees the connection close).
"""
from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from dask.utils import parse_bytes

USAGE = "python -m gpuflow.dask worker SCHEDULER_ADDRESS [options]"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gpuflow-dask-worker", usage=USAGE,
        description="Dask workers on devices leased from this node's gpuflow service.")
    p.add_argument("scheduler", nargs="?", help="the Dask scheduler, e.g. tcp://10.0.0.1:8786")
    p.add_argument("--scheduler-file", help="read the scheduler's address from this file")
    p.add_argument("--pool", dest="endpoint",
                   help="the node's gpuflow service (default: GPUFLOW_POOL, else the user's own "
                        "service, else the node's system service)")
    p.add_argument("--nworkers", type=int,
                   help="workers to start (default: the service's devices / --gpus-per-worker)")
    p.add_argument("--gpus-per-worker", type=float, default=1,
                   help="devices per worker, or a fraction of one (default 1)")
    p.add_argument("--gpu-memory", default="0",
                   help="bytes per device to lease, e.g. 16GB (default: the whole share)")
    p.add_argument("--nthreads", type=int, default=1, help="threads per worker (default 1)")
    p.add_argument("--memory-limit", default="auto", help="host memory per worker (Dask's)")
    p.add_argument("--device-memory-limit",
                   help="bytes per device for gpuflow pools in the workers, e.g. 8GB")
    p.add_argument("--spill-threshold", type=float,
                   help="gpuflow's device spilling threshold in the workers (a fraction)")
    p.add_argument("--lease-timeout", type=float,
                   help="seconds to wait for the devices (default: as long as it takes)")
    p.add_argument("--host", help="address the workers listen on (default: Dask's choice)")
    p.add_argument("--name", help="worker name prefix (default: the host name)")
    p.add_argument("--resources", default="",
                   help="extra resources every worker advertises, e.g. 'bigmem=1 ssd=1'")
    p.add_argument("--local-directory", help="Dask's scratch directory")
    p.add_argument("--death-timeout", type=float,
                   help="seconds to wait for the scheduler before giving up")
    return p


def _resources(text: str) -> dict:
    out = {}
    for item in text.replace(",", " ").split():
        name, _, amount = item.partition("=")
        if not name or not amount:
            raise SystemExit(f"gpuflow-dask-worker: --resources: '{item}' is not NAME=AMOUNT")
        out[name] = float(amount)
    return out


async def _serve(args) -> int:
    import socket

    from ._dask_cluster import GPUNanny, service_devices, service_endpoint
    from ._lease import client_endpoint

    endpoint = service_endpoint(args.endpoint)
    if endpoint is None:
        print("gpuflow-dask-worker: no gpuflow service on this node: --pool not given, "
              f"GPUFLOW_POOL not set and nothing listens at {client_endpoint()} "
              "(start one with `gpuflow serve`)", file=sys.stderr)
        return 2
    count = args.nworkers
    if count is None:
        devices = len(service_devices(endpoint))
        count = max(1, int(devices / args.gpus_per_worker)) if devices else 0
    if count < 1:
        print(f"gpuflow-dask-worker: the service at {endpoint} has no devices", file=sys.stderr)
        return 2
    prefix = args.name or socket.gethostname()
    nannies = [
        GPUNanny(args.scheduler, scheduler_file=args.scheduler_file, nthreads=args.nthreads,
                 name=f"{prefix}-gpu{i}", gpuflow_endpoint=endpoint, gpus=args.gpus_per_worker,
                 gpu_memory=parse_bytes(args.gpu_memory), lease_timeout=args.lease_timeout,
                 device_memory_limit=(parse_bytes(args.device_memory_limit)
                                      if args.device_memory_limit else None),
                 spill_threshold=args.spill_threshold, host=args.host,
                 memory_limit=args.memory_limit, resources=_resources(args.resources) or None,
                 local_directory=args.local_directory, death_timeout=args.death_timeout)
        for i in range(count)
    ]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    stopping = asyncio.ensure_future(stop.wait())
    starting = asyncio.ensure_future(asyncio.gather(*(n.start() for n in nannies)))
    done, _ = await asyncio.wait({stopping, starting}, return_when=asyncio.FIRST_COMPLETED)
    if starting in done and starting.exception() is None:
        # Until a signal, or until every worker has ended (the scheduler went away).
        finished = asyncio.ensure_future(asyncio.gather(*(n.finished() for n in nannies)))
        await asyncio.wait({stopping, finished}, return_when=asyncio.FIRST_COMPLETED)
        finished.cancel()
        await asyncio.gather(finished, return_exceptions=True)
    stopping.cancel()
    await asyncio.gather(*(n.close(timeout=10) for n in nannies), return_exceptions=True)
    if starting.done() and not starting.cancelled() and starting.exception() is not None:
        error = starting.exception()
        cause = error.__cause__ or error.__context__
        print(f"gpuflow-dask-worker: {error}" + (f" ({cause!r})" if cause else ""),
              file=sys.stderr)
        return 1
    # Nannies still waiting for their leases block in the library; leaving the process ends
    # those requests (the service drops a closed connection's queue).
    return 0


def console_main() -> int:
    """The gpuflow-dask-worker console script: `worker` is implied."""
    return main(["worker", *sys.argv[1:]])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "run":
        from ._dask_documents import run_main
        return run_main(argv[1:])
    if not argv or argv[0] != "worker":
        print(f"usage: {USAGE}\n       python -m gpuflow.dask run SCHEDULER_ADDRESS DOCUMENT "
              "[--plugin LIB]...\n(--help after the command for its options)", file=sys.stderr)
        return 2
    args = _parser().parse_args(argv[1:])
    if not args.scheduler and not args.scheduler_file:
        print("gpuflow-dask-worker: give the scheduler's address or --scheduler-file",
              file=sys.stderr)
        return 2
    import os
    code = asyncio.run(_serve(args))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # threads blocked in gf_lease_acquire must not keep the process alive
