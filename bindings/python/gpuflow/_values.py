"""Opaque values: Python objects owned by gpuflow through an integer key.

Python objects handed to gpuflow (task results, host values) live in ``VALUES`` under an
integer key (put_value); that key is the opaque ``void *`` gpuflow stores, with
DESTROY_VALUE_ADDR as its destructor. gpuflow calls it exactly once when it frees the data,
which drops the entry. No Py_IncRef games. The CFUNCTYPE object is module-level, hence
referenced for the life of the interpreter.

Device values. A task that runs on a GPU worker hands its result to gpuflow as device data
(gf_task_ctx_set_device_value): it is charged to the device's gpu_memory with its size
(``value_size``: ``nbytes`` when the object has an integer one, else ``dask.sizeof.sizeof``
when Dask is importable, else ``sys.getsizeof``), and spilled to host and back under memory
pressure through the spill/unspill pair of its kind (``device_value_ops``):
- classes registered with ``register_spillable(cls, to_host, to_device)``: those functions;
- objects with ``__cuda_array_interface__`` (CuPy arrays and the like): ``cupy.asnumpy`` and
  ``cupy.asarray`` on the task's device, when CuPy is importable; otherwise pinned (counted,
  never spilled);
- anything else (NumPy arrays, Python objects) is a host object already: its spill and unspill
  are the identity (the object is re-keyed, nothing is copied), so it counts against the device
  while resident and leaves the device at no cost under pressure, as dask-cuda moves host
  objects off a GPU worker's device memory.
Each form (device or host) is its own VALUES key; DESTROY_VALUE_ADDR releases either.
"""
from __future__ import annotations

import ctypes
import itertools
import sys
import threading
from ctypes import c_void_p

from . import _ffi as F

__all__ = ["DESTROY_VALUE_ADDR", "VALUES", "device_value_ops", "live_values", "put_value",
           "register_spillable", "size_estimate", "value_size"]

VALUES: dict[int, object] = {}
_next_value_key = itertools.count(1).__next__  # atomic under the GIL; 0 is never used


def _destroy_value(key):
    # Runs on whichever thread drops gpuflow's last reference, with the GIL (ctypes callback).
    # It must not call into gpuflow, and it does not.
    VALUES.pop(key, None)


_DESTROY = F.DESTROY_FN(_destroy_value)
DESTROY_VALUE_ADDR = ctypes.cast(_DESTROY, c_void_p).value


def put_value(obj) -> int:
    """Stores obj; returns the key to hand to gpuflow (with DESTROY_VALUE_ADDR)."""
    key = _next_value_key()
    VALUES[key] = obj
    return key


def live_values() -> int:
    """How many Python objects gpuflow holds right now (for leak checks in tests)."""
    return len(VALUES)


def size_estimate(obj) -> int:
    """A value's size estimate for gpuflow: its nbytes when it has one."""
    n = getattr(obj, "nbytes", 0)
    return n if type(n) is int and n > 0 else 0


_dask_sizeof = None  # dask.sizeof.sizeof, looked up on first use; False when Dask is missing


def value_size(obj) -> int:
    """The bytes a value occupies, as Dask counts them: its integer ``nbytes`` when it has one,
    else ``dask.sizeof.sizeof`` (``sys.getsizeof`` without Dask)."""
    global _dask_sizeof
    n = getattr(obj, "nbytes", None)
    if type(n) is int and n >= 0:
        return n
    if _dask_sizeof is None:
        try:
            from dask.sizeof import sizeof as _s
            _dask_sizeof = _s
        except Exception:  # Dask missing or broken: the plain fallback
            _dask_sizeof = False
    try:
        n = _dask_sizeof(obj) if _dask_sizeof else sys.getsizeof(obj)
    except Exception:
        n = sys.getsizeof(obj)
    return int(n) if n and n > 0 else 0


# Spill kinds, by index (the gf_value_ops.user_data gpuflow passes back): (to_host, to_device),
# to_device taking (host_object, device ordinal).
_KINDS: list = []
_OPS: list = []            # gf_value_ops per kind, kept alive here
_OPS_ADDR: list = []       # their addresses
_BY_CLASS: dict = {}       # registered class -> kind
_TYPE_CACHE: dict = {}     # type -> kind (or None: pinned), for lookups through the MRO
_lock = threading.Lock()


def _spill(key, kind):
    # Called by gpuflow outside its locks, with the GIL (ctypes callback). NULL: cannot move.
    try:
        host = _KINDS[kind or 0][0](VALUES[key])  # user_data 0 arrives as None
        return put_value(host)
    except BaseException:  # noqa: B036 -- nothing may propagate into C
        return None


def _unspill(key, device, kind):
    try:
        dev = _KINDS[kind or 0][1](VALUES[key], device)
        return put_value(dev)
    except BaseException:  # noqa: B036
        return None


_SPILL = F.SPILL_FN(_spill)
_UNSPILL = F.UNSPILL_FN(_unspill)


def _add_kind(to_host, to_device) -> int:
    ops = F.gf_value_ops()
    ops.struct_size = ctypes.sizeof(ops)
    ops.spill = ctypes.cast(_SPILL, c_void_p).value
    ops.unspill = ctypes.cast(_UNSPILL, c_void_p).value
    ops.user_data = len(_KINDS)
    _KINDS.append((to_host, to_device))
    _OPS.append(ops)
    _OPS_ADDR.append(ctypes.addressof(ops))
    return len(_KINDS) - 1


def _identity(obj, device=None):
    return obj


_IDENTITY = _add_kind(_identity, _identity)
_CUPY = None  # the CuPy kind, added when a CuPy-like value is first seen and CuPy imports


def _cupy_kind():
    global _CUPY
    if _CUPY is None:
        try:
            import cupy
        except Exception:
            _CUPY = False
        else:
            def to_device(host, device):
                with cupy.cuda.Device(device):
                    return cupy.asarray(host)
            _CUPY = _add_kind(cupy.asnumpy, to_device)
    return _CUPY


def register_spillable(cls, to_host, to_device):
    """Tells gpuflow how to move results of class ``cls`` (and its subclasses) produced by tasks
    on GPU workers off the device and back under memory pressure: ``to_host(obj)`` returns a host
    form of obj (e.g. a NumPy copy), ``to_device(host)`` a device object again (it runs on a
    gpuflow thread; the task's device is current for CuPy). Both run with the GIL, outside task
    bodies; an exception in to_host leaves the object pinned on its device, one in to_device fails
    the task that needed it. ``to_device=None`` with ``to_host=None`` pins the class (counted,
    never moved)."""
    if not isinstance(cls, type):
        raise TypeError("register_spillable: cls must be a class")
    if (to_host is None) != (to_device is None):
        raise TypeError("register_spillable: give both to_host and to_device, or neither")
    with _lock:
        if to_host is None:
            _BY_CLASS[cls] = None
        else:
            _BY_CLASS[cls] = _add_kind(to_host, lambda host, device: to_device(host))
        _TYPE_CACHE.clear()


def _kind_of(obj):
    t = type(obj)
    try:
        return _TYPE_CACHE[t]
    except KeyError:
        pass
    kind = _IDENTITY
    for base in t.__mro__:
        if base in _BY_CLASS:
            kind = _BY_CLASS[base]
            break
    else:
        if hasattr(obj, "__cuda_array_interface__"):
            kind = _cupy_kind() or None  # without CuPy: pinned
    with _lock:
        _TYPE_CACHE[t] = kind
    return kind


def device_value_ops(obj):
    """The address of the gf_value_ops for obj (a result produced on a GPU worker), or None to
    pin it on its device."""
    kind = _kind_of(obj)
    return None if kind is None else _OPS_ADDR[kind]
