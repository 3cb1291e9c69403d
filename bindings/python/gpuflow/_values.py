"""Opaque values: Python objects owned by gpuflow through an integer key.

Python objects handed to gpuflow (task results, host values) live in ``_VALUES`` under an
integer key; that key is the opaque ``void *`` gpuflow stores. gpuflow calls the destructor
``_DESTROY`` exactly once when it frees the data, which drops the entry. No Py_IncRef games.
The CFUNCTYPE object is module-level, hence referenced for the life of the interpreter.
"""
from __future__ import annotations

import ctypes
import itertools
from ctypes import c_void_p

from . import _ffi as F

_VALUES: dict[int, object] = {}
_next_value_key = itertools.count(1).__next__  # atomic under the GIL; 0 is never used


def _destroy_value(key):
    # Runs on whichever thread drops gpuflow's last reference, with the GIL (ctypes callback).
    # It must not call into gpuflow, and it does not.
    _VALUES.pop(key, None)


_DESTROY = F.DESTROY_FN(_destroy_value)
_DESTROY_ADDR = ctypes.cast(_DESTROY, c_void_p).value


def _put_value(obj) -> int:
    key = _next_value_key()
    _VALUES[key] = obj
    return key


def live_values() -> int:
    """How many Python objects gpuflow holds right now (for leak checks in tests)."""
    return len(_VALUES)


def _size_estimate(obj) -> int:
    n = getattr(obj, "nbytes", 0)
    return n if type(n) is int and n > 0 else 0
