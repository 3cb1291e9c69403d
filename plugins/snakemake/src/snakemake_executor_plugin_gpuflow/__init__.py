"""Snakemake executor plugin: `snakemake --executor gpuflow` runs every job on this node under a
lease from the node's gpuflow service, so GPU jobs get distinct devices in CUDA_VISIBLE_DEVICES
and wait their turn in fair share with everything else that uses the node's GPUs.

Each job runs as ``gpuflow lease --gpus N [--gpu-memory B] -- sh -c '<the job>'``, where the job
is Snakemake's own per-job command (``python -m snakemake --target-jobs ... --mode subprocess``,
as the local executor uses for `run:` jobs). The lease is held by that `gpuflow lease` process:

- the job starts only once the lease is granted (the command waits for it);
- the lease ends when the job ends, however it ends, and not before: `gpuflow lease` releases
  once no process of the job is left, and the service keeps the lease of a killed `gpuflow lease`
  until the job's processes are gone; even if Snakemake itself is killed;
- each job is a session of its own, so cancelling (Ctrl-C) signals the whole job tree.

Rules without a GPU request run the same way without a lease (they never wait for the service).
See plugins/snakemake/README.md for the resource names and the endpoint rules.
"""
# No `from __future__ import annotations`: Snakemake reads ExecutorSettings' field types at run
# time to build its command-line options.
import inspect
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Optional

from snakemake_interface_common.exceptions import WorkflowError
from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo
from snakemake_interface_executor_plugins.executors.real import RealExecutor
from snakemake_interface_executor_plugins.jobs import JobExecutorInterface
from snakemake_interface_executor_plugins.settings import (CommonSettings, ExecMode,
                                                           ExecutorSettingsBase)

__all__ = ["Executor", "ExecutorSettings", "LeaseRequest", "common_settings", "lease_request",
           "parse_size"]

# Seconds a cancelled job gets between SIGTERM and SIGKILL: enough for the job's own Snakemake to
# remove its incomplete outputs, short enough that Ctrl-C feels like Ctrl-C.
KILL_GRACE_S = 5.0
# A leased job's `gpuflow lease` ends its whole tree itself (SIGTERM, SIGKILL after --grace, then
# the release): it gets this much longer before it is killed in turn.
RELEASE_MARGIN_S = 5.0


def parse_size(text) -> int:
    """Bytes from an int or "512M", "8GB", "16GiB", "1.5G": K/M/G/T are powers of 1000 unless
    followed by "i" (KiB, MiB, ...), as in Snakemake's own `mem` resource."""
    if isinstance(text, bool):
        raise ValueError(f"not a size: {text!r}")
    if isinstance(text, int):
        value = text
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(?:([kKmMgGtT])(i?)[bB]?|[bB])?\s*", str(text))
        if not m:
            raise ValueError(f"not a size: {text!r} (use bytes, or K, M, G, T with an optional "
                             "i for powers of 1024: 8G, 16GiB)")
        number, unit, binary = m.groups()
        power = "kmgt".index(unit.lower()) + 1 if unit else 0
        value = int(float(number) * (1024 if binary else 1000) ** power)
    if value < 0:
        raise ValueError(f"not a size: {text!r} (negative)")
    return value


def _unparse_size(value) -> str:
    return str(value)


@dataclass
class ExecutorSettings(ExecutorSettingsBase):
    endpoint: Optional[str] = field(
        default=None,
        metadata={
            "help": "The gpuflow service to lease from (unix:///path/gpuflow.sock). Default: "
                    "$GPUFLOW_POOL, else your own service's socket, else the node's system "
                    "service's (/run/gpuflow/gpuflow.sock), if one listens there, else a "
                    "private service started for this run.",
            "env_var": False,
            "required": False,
        },
    )
    emulated_devices: Optional[int] = field(
        default=None,
        metadata={
            "help": "Private service only: emulate this many devices instead of using the "
                    "node's GPUs (default: the node's GPUs, else the library's emulated ones).",
            "env_var": False,
            "required": False,
        },
    )
    device_memory: Optional[int] = field(
        default=None,
        metadata={
            "help": "Private service only: memory of each emulated device (8G, 512MiB, bytes).",
            "env_var": False,
            "required": False,
            "parse_func": parse_size,
            "unparse_func": _unparse_size,
        },
    )
    cli: Optional[str] = field(
        default=None,
        metadata={
            "help": "The `gpuflow` command that holds each job's lease (default: $GPUFLOW_CLI, "
                    "else the one installed next to libgpuflow, else `gpuflow` on PATH).",
            "env_var": False,
            "required": False,
        },
    )


# A local executor as far as Snakemake is concerned: --cores/--jobs, localrules and the shared
# file system work as with `--executor local`; jobs just run under a lease.
common_settings = CommonSettings(
    non_local_exec=False,
    implies_no_shared_fs=False,
    job_deploy_sources=False,
    pass_envvar_declarations_to_cmd=True,
    auto_deploy_default_storage_provider=False,
)


@dataclass(frozen=True)
class LeaseRequest:
    gpus: float
    gpu_memory: int = 0  # bytes on each device; 0: the whole device (or its share of one)

    def cli_args(self) -> list:
        args = ["--gpus", f"{self.gpus:g}"]
        if self.gpu_memory:
            args += ["--gpu-memory", str(self.gpu_memory)]
        return args

    def __str__(self):
        return f"gpu={self.gpus:g}" + (f", gpu_memory={self.gpu_memory} bytes"
                                       if self.gpu_memory else "")


_MEMORY_RESOURCES = {"gpu_mem_mb": 1000 ** 2, "gpu_mem_mib": 1024 ** 2, "gpu_mem": None}


def lease_request(resources) -> Optional[LeaseRequest]:
    """The lease a job's resources ask for, None for a job without a GPU request. Raises
    ValueError naming the resource when one is malformed.

    - ``gpu`` (or ``gpus``): a whole number of devices, or a fraction of one as a string
      ("0.5"; Snakemake resources are integers or strings);
    - ``gpu_mem_mb`` / ``gpu_mem_mib`` (integers) or ``gpu_mem`` ("8G", "16GiB"): memory needed
      on each device; the lease then takes that much instead of the whole device's.
    """
    get = resources.get
    given = {name: get(name) for name in ("gpu", "gpus") if get(name) is not None}
    if len(given) == 2 and _number("gpu", given["gpu"]) != _number("gpus", given["gpus"]):
        raise ValueError(f"resources gpu={given['gpu']} and gpus={given['gpus']} disagree")
    gpus = 0.0
    for name, value in given.items():
        gpus = _number(name, value)
    memory = 0
    mem_given = [(name, get(name)) for name in _MEMORY_RESOURCES if get(name) is not None]
    if len(mem_given) > 1:
        raise ValueError("give one of " + ", ".join(_MEMORY_RESOURCES) + ", not "
                         + " and ".join(name for name, _ in mem_given))
    for name, value in mem_given:
        unit = _MEMORY_RESOURCES[name]
        try:
            memory = parse_size(value) if unit is None else int(_number(name, value) * unit)
        except ValueError as e:
            raise ValueError(f"resource {name}={value!r}: {e}") from None
    if gpus == 0:
        if memory:
            raise ValueError(f"resource {mem_given[0][0]} needs a gpu resource too (gpu=1)")
        return None
    if gpus > 1 and gpus != math.floor(gpus):
        raise ValueError(f"resource gpu={gpus:g}: more than one device must be a whole number")
    return LeaseRequest(gpus=gpus, gpu_memory=memory)


def _number(name, value) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"resource {name}={value!r} is not a number") from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"resource {name}={value!r} must be a non-negative number")
    return number


def find_cli(explicit: Optional[str] = None) -> str:
    """The `gpuflow` command: the setting, $GPUFLOW_CLI, the one next to the loaded library
    (an install prefix's bin/, or a build tree's tools/gpuflow/), else PATH."""
    import gpuflow

    for candidate in (explicit, os.environ.get("GPUFLOW_CLI")):
        if candidate:
            if not os.access(candidate, os.X_OK):
                raise WorkflowError(f"gpuflow executor: the gpuflow command {candidate} is not "
                                    "an executable")
            return candidate
    lib_dir = os.path.dirname(os.path.realpath(gpuflow.library_path))
    for candidate in (os.path.join(os.path.dirname(lib_dir), "bin", "gpuflow"),
                      os.path.join(os.path.dirname(lib_dir), "tools", "gpuflow", "gpuflow")):
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("gpuflow")
    if found:
        return found
    raise WorkflowError("gpuflow executor: no `gpuflow` command next to "
                        f"{gpuflow.library_path} or on PATH (give --gpuflow-cli or GPUFLOW_CLI)")


class Executor(RealExecutor):
    def __post_init__(self):
        import gpuflow

        self._gpuflow = gpuflow
        settings = self.workflow.executor_settings or ExecutorSettings()
        self._cli = find_cli(settings.cli)
        self._service = None
        self._service_dir = None
        self.endpoint, self._status = self._connect(settings)
        self._lock = threading.Lock()
        self._running = {}  # jobid -> subprocess.Popen of the job's `gpuflow lease` (or sh)
        self._watchers = []
        self._cancelling = False

    # -- the service --------------------------------------------------------------------------

    def _connect(self, settings):
        """The endpoint to lease from and its status (devices): the setting, GPUFLOW_POOL, the
        default socket when a service answers there, else a private service for this run."""
        gf = self._gpuflow
        explicit = settings.endpoint or os.environ.get("GPUFLOW_POOL")
        source = "--gpuflow-endpoint" if settings.endpoint else "GPUFLOW_POOL"
        private_options = settings.emulated_devices is not None or \
            settings.device_memory is not None
        if explicit or not private_options:
            # The user's own service, else the node's system service (a binding older than
            # client_endpoint knows the first only).
            endpoint = explicit or getattr(gf, "client_endpoint", gf.default_endpoint)()
            try:
                with gf.Pool(endpoint=endpoint, cpu_workers=1) as pool:
                    status = pool.service_status()
                self.logger.info(f"gpuflow: leasing from the service at {endpoint} "
                                 f"({_describe(status)})")
                if private_options:
                    self.logger.info("gpuflow: --gpuflow-emulated-devices and "
                                     "--gpuflow-device-memory apply to a private service "
                                     "only; this run uses the one named above")
                return endpoint, status
            except gf.GpuflowError as e:
                if explicit:  # the user named it: not being there is an error, not a fallback
                    raise WorkflowError(f"gpuflow executor: {e} (the service named by "
                                        f"{source})") from None
        # No service (or private-service options given): one for this run, in this process.
        self._service_dir = tempfile.mkdtemp(prefix="gpuflow-snakemake-")
        options = {"cpu_workers": os.cpu_count() or 1}
        if settings.emulated_devices is not None:
            options.update(backend="host", emulated_devices=settings.emulated_devices)
        if settings.device_memory is not None:
            options["device_memory"] = settings.device_memory
        if "log" in inspect.signature(gf.Service).parameters:
            # Its connect/grant/release lines belong in Snakemake's --verbose output, not on
            # the terminal (a binding without `log` prints them to stderr).
            options["log"] = self.logger.debug
        try:
            self._service = gf.Service(socket_path=os.path.join(self._service_dir, "gf.sock"),
                                       **options)
        except gf.GpuflowError as e:
            shutil.rmtree(self._service_dir, ignore_errors=True)
            raise WorkflowError(f"gpuflow executor: cannot start a private service: {e}") \
                from None
        with gf.Pool(endpoint=self._service.endpoint, cpu_workers=1) as pool:
            status = pool.service_status()
        self.logger.info(f"gpuflow: no service configured; started a private one for this run "
                         f"at {self._service.endpoint} ({_describe(status)})")
        return self._service.endpoint, status

    def _infeasible(self, request: LeaseRequest) -> Optional[str]:
        """Why the service would refuse this request outright (it refuses such requests at once
        too, but saying so here names the rule and keeps the job from starting)."""
        devices = self._status.get("devices", [])
        memory = max((d["memory"] for d in devices), default=0)
        where = f"the gpuflow service at {self.endpoint}"
        if not devices:
            return f"{where} has no GPUs"
        if request.gpus > len(devices):
            return f"{where} has {len(devices)} device(s)"
        if request.gpu_memory > memory:
            return f"the largest device of {where} has {memory} bytes"
        return None

    # -- running jobs -------------------------------------------------------------------------

    def run_job(self, job: JobExecutorInterface):
        job_info = SubmittedJobInfo(job=job)
        try:
            request = lease_request(job.resources)
            problem = request and self._infeasible(request)
        except ValueError as e:
            request, problem = None, str(e)
        if problem:
            self.report_job_submission(job_info, register_job=False)
            ask = f" asks for {request};" if request else ""
            self.report_job_error(job_info, msg=f"gpuflow executor: {_describe_job(job)}"
                                                f"{ask} {problem}")
            return
        if request is None and _nothing_to_run(job):
            # A rule with neither an action nor outputs (typically `all`): done as soon as it is
            # ready, as in the local executor, instead of a Snakemake process (~1 s) of its own.
            self.report_job_submission(job_info, register_job=False)
            self.report_job_success(job_info)
            return
        command = ["/bin/sh", "-c", self.format_job_exec(job)]
        if request is not None:
            command = [self._cli, "lease", "--pool", self.endpoint, *request.cli_args(),
                       "--grace", f"{KILL_GRACE_S:g}",
                       "--name", f"snakemake {_describe_job(job)}", "--", *command]
        self.logger.debug(f"gpuflow: job {job.jobid}: {shlex.join(command)}")
        # A session of its own: the job tree can be signalled as a whole on cancel, and a Ctrl-C
        # at the terminal reaches Snakemake only, which then cancels every job the same way.
        proc = subprocess.Popen(command, start_new_session=True)
        with self._lock:
            self._running[job.jobid] = proc
        self.report_job_submission(job_info)
        self._watchers = [w for w in self._watchers if w.is_alive()]
        watcher = threading.Thread(target=self._watch, args=(job_info, proc),
                                   name=f"gpuflow-job-{job.jobid}", daemon=True)
        self._watchers.append(watcher)
        watcher.start()

    def _watch(self, job_info: SubmittedJobInfo, proc: subprocess.Popen):
        returncode = proc.wait()
        with self._lock:
            self._running.pop(job_info.job.jobid, None)
            if self._cancelling:
                return  # Snakemake is shutting down on the user's request: nothing to report
        if returncode == 0:
            self.report_job_success(job_info)
        else:
            # The job's own Snakemake has printed its error; this adds the rule, log and
            # command as the local executor does.
            self.report_job_error(job_info)

    def get_exec_mode(self):
        return ExecMode.SUBPROCESS

    def get_python_executable(self):
        return sys.executable

    def get_job_exec_prefix(self, job: JobExecutorInterface):
        return f"cd {shlex.quote(self.workflow.workdir_init)}"

    def additional_general_args(self):
        # What the local executor passes to the Snakemake it spawns per job: the main process
        # already reports progress and rules.
        return "--quiet progress rules host"

    @property
    def cores(self):
        return self.workflow.resource_settings.cores

    # -- ending -------------------------------------------------------------------------------

    def cancel(self):
        """Ctrl-C: SIGTERM to every job's process group. A job without a lease (sh, the job's
        Snakemake and its shell command) gets SIGKILL for what is left after KILL_GRACE_S. A
        leased job's group is its `gpuflow lease` process, which passes the SIGTERM to the whole
        job (a process group of its own), SIGKILLs what is left after KILL_GRACE_S (--grace),
        and releases the lease once nothing of the job is left; it is killed only if it has not
        ended RELEASE_MARGIN_S later (then the service ends the job and its lease)."""
        with self._lock:
            self._cancelling = True
            running = list(self._running.values())
        for proc in running:
            _signal_group(proc, signal.SIGTERM)
        leased = any(getattr(proc, "args", [None])[:2] == [self._cli, "lease"] for proc in running)
        deadline = time.monotonic() + KILL_GRACE_S + (RELEASE_MARGIN_S if leased else 0.0)
        for proc in running:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            # The group may outlive its leader (a job's child that ignores SIGTERM): make sure.
            _signal_group(proc, signal.SIGKILL)
            proc.wait()
        self.shutdown()

    def shutdown(self):
        for watcher in self._watchers:
            watcher.join()
        self._watchers.clear()
        if self._service is not None:
            self._service.stop()
            self._service = None
        if self._service_dir is not None:
            shutil.rmtree(self._service_dir, ignore_errors=True)
            self._service_dir = None


def _nothing_to_run(job) -> bool:
    # is_norun (no shell/run/script/wrapper/notebook/cwl) is Snakemake's, not the interface's:
    # without it, every job gets its process.
    return (not job.is_group() and getattr(job, "is_norun", False) is True
            and not list(job.output) and not list(job.log) and not job.benchmark)


def _signal_group(proc: subprocess.Popen, sig):
    try:
        os.killpg(proc.pid, sig)  # start_new_session: the group id is the leader's pid
    except ProcessLookupError:
        pass  # the whole group is gone


def _describe_job(job) -> str:
    if job.is_group():
        return f"group {job.groupid} (jobid {job.jobid})"
    return f"rule {job.rule.name} (jobid {job.jobid})"


def _describe(status) -> str:
    devices = status.get("devices", [])
    kind = "emulated " if devices and all(d.get("emulated") for d in devices) else ""
    return f"{len(devices)} {kind}device(s), {status.get('cpus', 0)} CPU(s)"
