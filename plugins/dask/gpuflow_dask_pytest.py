"""pytest plugin: run Dask's own test modules with gpuflow as Dask's default scheduler.

    PYTHONPATH=plugins/dask pytest -p gpuflow_dask_pytest \
        .venv/lib/python3.*/site-packages/dask/tests/test_delayed.py

- Before every test, ``dask.config.set(scheduler=gpuflow.dask.get)`` (so a test that resets the
  configuration still runs on gpuflow); tests that choose a scheduler themselves keep theirs.
- One small pool per process (2 CPU workers, 2 emulated devices; GPUFLOW_TEST_CPU_WORKERS
  overrides the CPU count), closed when pytest ends.
- The tests listed in EXCLUDED are skipped with their reason (they inspect internals of Dask's
  own schedulers); plugins/dask/README.md lists the same tests and reasons (a plugin test checks
  that both lists agree).
- The terminal summary says how many graphs gpuflow.dask.get ran, so a silently inactive plugin
  cannot pass for a green run.
"""
from __future__ import annotations

import os

import dask
import pytest

import gpuflow
import gpuflow.dask

# "module.py::test_name" (all parametrizations) or "module.py::test_name[param]": reason.
EXCLUDED: dict[str, str] = {}

_calls = {"graphs": 0, "tasks": 0}
_real_get = gpuflow.dask.get


def _counting_get(dsk, keys, **kwargs):
    _calls["graphs"] += 1
    return _real_get(dsk, keys, **kwargs)


_state: dict = {}


def pytest_configure(config):
    # Dask's own pytest configuration (its pyproject.toml, not shipped in the wheel) turns
    # warnings raised from dask into errors; some tests rely on it (pytest.raises(Warning)).
    config.addinivalue_line("filterwarnings", "error:::dask[.*]")
    config.addinivalue_line("markers", "slow: Dask's marker for slow tests")
    workers = int(os.environ.get("GPUFLOW_TEST_CPU_WORKERS", "2"))
    pool = gpuflow.Pool(cpu_workers=workers, emulated_devices=2)
    gpuflow.dask.set_default_pool(pool)
    _state["pool"] = pool
    dask.config.set(scheduler=_counting_get)
    _route_assert_eq()


def _route_assert_eq():
    """dask.array.utils.assert_eq computes with scheduler="sync" unless told otherwise, which
    would bypass gpuflow in most of test_array_core.py: make its default "the configured
    scheduler" (None). Tests that pass a scheduler explicitly keep theirs."""
    from dask.array import utils

    fn = utils.assert_eq
    names = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    defaults = list(fn.__defaults__)
    index = names.index("scheduler") - (len(names) - len(defaults))
    if defaults[index] == "sync":
        defaults[index] = None
        fn.__defaults__ = tuple(defaults)


def pytest_unconfigure(config):
    pool = _state.pop("pool", None)
    if pool is not None:
        gpuflow.dask.set_default_pool(None)
        pool.close()


def _exclusion(item) -> str | None:
    module = item.path.name if hasattr(item, "path") else item.fspath.basename
    name = getattr(item, "originalname", None) or item.name
    return EXCLUDED.get(f"{module}::{item.name}") or EXCLUDED.get(f"{module}::{name}")


def pytest_collection_modifyitems(config, items):
    for item in items:
        reason = _exclusion(item)
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"excluded under gpuflow: {reason}"))


def pytest_runtest_setup(item):
    dask.config.set(scheduler=_counting_get)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    excluded = sum(1 for r in terminalreporter.stats.get("skipped", [])
                   if "excluded under gpuflow" in str(getattr(r, "longrepr", "")))
    if getattr(config.option, "numprocesses", None):  # pytest-xdist: counted in its workers
        ran = "graphs in the xdist workers (not counted here)"
    else:
        ran = f"{_calls['graphs']} graphs"
    terminalreporter.write_line(
        f"gpuflow: gpuflow.dask.get ran {ran}; "
        f"{excluded} tests excluded (see plugins/dask/README.md)")
