"""Opaque values: Python objects owned by gpuflow through an integer key.

Python objects handed to gpuflow (task results, host values) live in ``VALUES`` under an
integer key (put_value); that key is the opaque ``void *`` gpuflow stores, with
DESTROY_VALUE_ADDR as its destructor. gpuflow calls it exactly once when it frees the data,
which drops the entry. No Py_IncRef games. The CFUNCTYPE object is module-level, hence
referenced for the life of the interpreter.
"""
from __future__ import annotations

import ctypes
import itertools
from ctypes import c_void_p

from . import _ffi as F

__all__ = ["DESTROY_VALUE_ADDR", "VALUES", "live_values", "put_value", "size_estimate"]

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
