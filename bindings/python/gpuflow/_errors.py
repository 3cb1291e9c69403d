"""gpuflow's errors: one exception class per gf_status, carrying gpuflow's message
(gf_last_error), and the helpers that turn a status into one."""
from __future__ import annotations

from . import _ffi as F


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


def status_error(status: int, message: str | None = None) -> GpuflowError:
    if message is None:
        message = F.last_error()
    cls = _ERRORS.get(status, GpuflowError)
    return cls(message or F.status_name(status), status)


def check(status: int) -> int:
    if status < 0:
        raise status_error(status)
    return status


def version() -> str:
    """The loaded library's version, "major.minor.patch"."""
    return F.gf_version_string().decode()
