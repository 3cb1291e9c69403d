"""Dask distributed on gpuflow: Dask workers whose GPUs come from leases of the node's gpuflow
service, so Dask workers, Snakemake jobs and any other program on a node never share a device by
accident (dask-cuda's workers take CUDA_VISIBLE_DEVICES as given and coordinate with nothing).

- GPUNanny: a distributed Nanny that waits for a lease before it starts its worker process; the
  worker sees the leased devices in CUDA_VISIBLE_DEVICES and advertises the resources
  ``GPU`` (devices, or the share of one) and ``gpu_memory`` (bytes). The lease belongs to the
  nanny process: a worker process that dies is restarted on the same devices; when the nanny
  goes (closed, killed), its connection to the service closes and the devices go back at once.
  When the service asks for the devices back (fair share: someone below their share waits), the
  nanny retires its worker (the scheduler moves its data to other workers first), hands the
  lease back, waits for a new one in the queue like everyone else, and starts the worker again.
- LocalGPUCluster: LocalCluster with one GPUNanny per device of the node's service (or a private
  service started for the cluster when none is configured).
- worker_main: ``python -m gpuflow.dask worker SCHEDULER`` (console script gpuflow-dask-worker),
  the equivalent of ``dask-cuda-worker SCHEDULER`` for a remote node.
"""
from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import threading

from distributed import LocalCluster, Nanny
from tornado.ioloop import PeriodicCallback

from ._errors import GpuflowError
from ._lease import client_endpoint
from ._pool import Pool
from ._service import Service

logger = logging.getLogger("gpuflow.dask")


def service_endpoint(endpoint: str | None = None) -> str | None:
    """The node's service to lease from: `endpoint`, else GPUFLOW_POOL, else client_endpoint()
    (the user's own service, else the node's system service) when a service listens there; None
    when there is none ("embedded" counts as none)."""
    for candidate in (endpoint, os.environ.get("GPUFLOW_POOL")):
        if candidate and candidate != "embedded":
            return candidate
    default = client_endpoint()
    path = default[len("unix://"):] if default.startswith("unix://") else None
    if path and os.path.exists(path):
        try:
            with Pool(endpoint=default, cpu_workers=1):
                return default
        except GpuflowError:
            return None  # a stale socket: nobody listens
    return None


def service_devices(endpoint: str) -> list[dict]:
    """The devices the service at `endpoint` serves (its status document's "devices")."""
    with Pool(endpoint=endpoint, cpu_workers=1) as pool:
        return pool.service_status()["devices"]


def lease_environment(lease, device_memory_limit=None, spill_threshold=None) -> dict[str, str]:
    """What a process running on `lease` needs in its environment: the lease's own
    (Lease.environment, as `gpuflow lease` gives its command) and settings for gpuflow pools
    created there. Such a pool is embedded on the leased devices: connecting to the node's
    service from inside the lease would only queue behind the lease itself."""
    env = dict(lease.environment)
    env["GPUFLOW_POOL"] = "embedded"
    if device_memory_limit is not None:
        env["GPUFLOW_DEVICE_MEMORY_LIMIT"] = str(int(device_memory_limit))
    if spill_threshold is not None:
        env["GPUFLOW_SPILL_THRESHOLD"] = str(float(spill_threshold))
    return env


def _give_back(granted):
    pool, lease = granted
    lease.release()
    pool.close()


async def _wait_in_daemon_thread(call, undo):
    """call() on a daemon thread, awaited. Waiting for a lease blocks in the library for as long
    as fair share takes: a daemon thread (unlike asyncio.to_thread's executor, which the event
    loop joins at shutdown) lets the process exit meanwhile. What a call whose waiter has gone
    away (cancelled, loop closed) still obtains is handed to undo()."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(result, error):
        if future.cancelled():
            if error is None:
                undo(result)
        elif error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def run():
        result, error = None, None
        try:
            result = call()
        except BaseException as e:  # handed to the waiter
            error = e
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the loop is closed: nobody waits any more
            if error is None:
                undo(result)

    threading.Thread(target=run, name="gpuflow-lease", daemon=True).start()
    return await future


class GPUNanny(Nanny):
    """A Nanny whose worker runs on devices leased from the node's gpuflow service.

    Extra keywords (everything else is Nanny's):
    - ``gpuflow_endpoint``: the service (default: as service_endpoint() finds it; none found is
      an error naming where it looked).
    - ``gpus``: devices per worker (a whole number, or a fraction of one device); ``gpu_memory``:
      bytes per device (0: the share's part of the device).
    - ``lease_timeout``: seconds to wait for the devices (None: as long as it takes, in fair
      share with everything else on the node).
    - ``device_memory_limit`` / ``spill_threshold``: passed to gpuflow pools in the worker.
    """

    def __init__(self, *args, gpuflow_endpoint: str | None = None, gpus: float = 1,
                 gpu_memory: int = 0, lease_timeout: float | None = None,
                 device_memory_limit: int | None = None, spill_threshold: float | None = None,
                 **kwargs):
        super().__init__(*args, **kwargs)
        self._gf_endpoint = gpuflow_endpoint
        self._gf_request = dict(gpus=gpus, gpu_memory=gpu_memory, timeout=lease_timeout)
        self._gf_settings = dict(device_memory_limit=device_memory_limit,
                                 spill_threshold=spill_threshold)
        self._gf_pool: Pool | None = None
        self.lease = None
        self._handing_back = False
        self.periodic_callbacks["gpuflow-lease"] = PeriodicCallback(self._check_lease, 250)

    def _acquire(self):
        endpoint = service_endpoint(self._gf_endpoint)
        if endpoint is None:
            raise GpuflowError(
                "no gpuflow service to lease GPUs from: none given, GPUFLOW_POOL is not set and "
                f"nothing listens at {client_endpoint()} (start one with `gpuflow serve`)")
        pool = Pool(endpoint=endpoint, cpu_workers=1)
        try:
            name = f"dask worker {self.name}" if self.name is not None else "dask worker"
            return pool, pool.lease(name=name, **self._gf_request)
        except BaseException:
            pool.close()
            raise

    def _release(self):
        lease, pool = self.lease, self._gf_pool
        self.lease = self._gf_pool = None
        if lease is not None:
            lease.release()
        if pool is not None:
            pool.close()

    def _apply_lease(self):
        self.env.update(lease_environment(self.lease, **self._gf_settings))
        gpus = sum(d.share for d in self.lease.devices)
        memory = sum(d.memory for d in self.lease.devices)
        self.resources = {**(self.resources or {}), "GPU": gpus, "gpu_memory": memory}
        if self.process is not None:  # a restart reuses the process object and its kwargs
            self.process.worker_kwargs["resources"] = self.resources

    def _check_lease(self):
        from distributed.core import Status

        if (self.lease is not None and not self._handing_back and
                self.status == Status.running and self.lease.revoked):
            self._handing_back = True
            asyncio.ensure_future(self._hand_back())

    async def _hand_back(self):
        """The service wants the devices back: retire the worker, release, queue again."""
        from distributed.core import Status

        logger.info("gpuflow lease %s of %s asked back: retiring the worker", self.lease.id,
                    self.name)
        try:
            if self.worker_address:
                try:
                    await self.scheduler.retire_workers(workers=[self.worker_address],
                                                        close_workers=False, remove=True,
                                                        stimulus_id="gpuflow-lease-revoked")
                except Exception as e:  # the data is recomputed instead
                    logger.warning("retiring %s before handing its devices back: %r",
                                   self.worker_address, e)
            await self.kill(reason="gpuflow-lease-revoked")
            self._release()
            self._gf_pool, self.lease = await _wait_in_daemon_thread(self._acquire, _give_back)
            if self.status != Status.running:  # closed meanwhile
                self._release()
                return
            self._apply_lease()
            self._handing_back = False
            await self.instantiate()
            logger.info("%s runs again on lease %s", self.name, self.lease.id)
        except Exception:
            logger.exception("%s could not come back after handing its devices back", self.name)
            await self.close(reason="gpuflow-lease-lost")
        finally:
            self._handing_back = False

    async def _on_worker_exit(self, exitcode):
        if self._handing_back:
            return  # stopped on purpose; _hand_back starts it again
        return await super()._on_worker_exit(exitcode)

    async def start_unsafe(self):
        if self.lease is None:
            self._gf_pool, self.lease = await _wait_in_daemon_thread(self._acquire, _give_back)
        self._apply_lease()
        try:
            return await super().start_unsafe()
        except BaseException:
            self._release()
            raise

    async def close(self, *args, **kwargs):
        try:
            return await super().close(*args, **kwargs)
        finally:
            self._release()  # after the worker process is gone: nothing runs on the devices


class LocalGPUCluster(LocalCluster):
    """A Dask cluster on this machine with one worker per GPU, each on devices leased from the
    node's gpuflow service (the equivalent of dask-cuda's LocalCUDACluster):

        from distributed import Client
        from gpuflow.dask import LocalGPUCluster
        with LocalGPUCluster() as cluster, Client(cluster) as client:
            x.compute()      # tasks annotated with resources={"GPU": 1} run on GPU workers

    While it is open, annotations survive Dask's optimisation (gpuflow.dask.keep_annotations).

    - ``n_workers``: default: as many as the service has devices (divided by gpus_per_worker).
    - ``endpoint``: the node's service; default: GPUFLOW_POOL, else client_endpoint() when a
      service listens there, else a private service started for (and stopped with) the cluster,
      configured by ``service_options`` (gpuflow.Service keywords, e.g. emulated_devices=2).
    - ``gpus_per_worker``, ``gpu_memory``, ``lease_timeout``, ``device_memory_limit``,
      ``spill_threshold``: see GPUNanny. ``threads_per_worker``: default 1, as dask-cuda's.
    - every other keyword goes to LocalCluster (and from there to the workers).
    """

    def __init__(self, n_workers: int | None = None, endpoint: str | None = None,
                 gpus_per_worker: float = 1, gpu_memory: int = 0,
                 lease_timeout: float | None = None, device_memory_limit: int | None = None,
                 spill_threshold: float | None = None, service_options: dict | None = None,
                 threads_per_worker: int = 1, **kwargs):
        self.service: Service | None = None
        # Annotations such as resources={"GPU": 1} must reach the scheduler (dask#7036).
        from .dask import keep_annotations
        self._annotations_kept = keep_annotations()
        resolved = service_endpoint(endpoint)
        if resolved is None:
            socket_dir = tempfile.mkdtemp(prefix="gpuflow-cluster-")
            self.service = Service(socket_path=os.path.join(socket_dir, "gpuflow.sock"),
                                   log=False, **(service_options or {}))
            resolved = self.service.endpoint
        self.gpuflow_endpoint = resolved
        try:
            if n_workers is None:
                devices = len(service_devices(resolved))
                n_workers = max(1, int(devices // gpus_per_worker)) if gpus_per_worker >= 1 \
                    else int(devices / gpus_per_worker)
            super().__init__(n_workers=n_workers, threads_per_worker=threads_per_worker,
                             processes=True, worker_class=GPUNanny, gpuflow_endpoint=resolved,
                             gpus=gpus_per_worker, gpu_memory=gpu_memory,
                             lease_timeout=lease_timeout,
                             device_memory_limit=device_memory_limit,
                             spill_threshold=spill_threshold, **kwargs)
        except BaseException:
            self._stop_service()
            raise

    def _stop_service(self):
        kept, self._annotations_kept = getattr(self, "_annotations_kept", None), None
        if kept is not None:
            kept.__exit__(None, None, None)
        service, self.service = self.service, None
        if service is not None:
            socket_dir = os.path.dirname(service.endpoint[len("unix://"):])
            service.stop()
            try:
                os.rmdir(socket_dir)
            except OSError:
                pass

    async def _close(self):
        try:
            await super()._close()
        finally:
            self._stop_service()
