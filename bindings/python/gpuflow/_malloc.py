"""Keeps glibc from handing freed chunks of large Python values back to the kernel between tasks.

Why: a pool runs each task's body on its own worker threads, so each worker allocates its
results (NumPy chunks of tens of MB) in its own glibc arena. When a chunk's last consumer
finishes, gpuflow frees it at once; an arena whose heap is then empty has a free top at least as
large as glibc's dynamic trim threshold (twice the largest freed mmap chunk, 64 MB for 32 MB
chunks), so glibc returns it with MADV_DONTNEED and the worker's next chunk faults every page back
in: on the seed workload 100k-150k minor faults and about 1 s of system time per 10 s run, where
Dask's threads, which free a little later, see about 100 (docs/benchmarks.md). Fixing the mmap
threshold at its dynamic maximum (32 MiB) and the trim threshold at one heap's size (64 MiB)
keeps glibc's steady state from the start and stops it trimming whole per-thread heaps; the
main heap still trims above 64 MiB free, larger chunks are still mapped and unmapped.

It changes the process's allocator, so: glibc only, once per process, not when the user set any
of glibc's MALLOC_* tunables (their choice wins), and not with GPUFLOW_MALLOC_TUNING=0.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 64 << 20
_USER_TUNABLES = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_",
                  "MALLOC_MMAP_MAX_", "GLIBC_TUNABLES")

_lock = threading.Lock()
_state: str | None = None  # what was done, once decided


def tune_for_large_values() -> str:
    """Applies the settings above once; returns what was done (for diagnostics and tests):
    "tuned", or "skipped: <why>"."""
    global _state
    with _lock:
        if _state is None:
            _state = _decide_and_apply()
        return _state


def _decide_and_apply() -> str:
    if os.environ.get("GPUFLOW_MALLOC_TUNING", "").strip() == "0":
        return "skipped: GPUFLOW_MALLOC_TUNING=0"
    for name in _USER_TUNABLES:
        if name in os.environ:
            return f"skipped: {name} is set"
    try:
        libc = ctypes.CDLL(None)
        version = libc.gnu_get_libc_version
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return "skipped: not glibc"
    version.restype = ctypes.c_char_p
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if not (mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)):
        return "skipped: mallopt refused"
    return "tuned"
