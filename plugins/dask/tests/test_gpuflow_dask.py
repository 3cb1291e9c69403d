"""Tests of the Dask scheduler gpuflow.dask.get: collections, annotations, errors, interrupts."""
import _thread
import ctypes
import gc
import os
import re
import threading
import time
import traceback
from operator import add

import dask
import dask.array as da
import dask.bag as db
import numpy as np
import pytest
from dask import delayed

import gpuflow
import gpuflow.dask
from gpuflow.dask import get
from terminal_child import Child
from waiting import main_thread_waits_for_a_run, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def pool():
    with gpuflow.Pool(cpu_workers=2, emulated_devices=2, device_memory=256 << 20,
                      cpu_labels={"bigmem": 1}, backend="host") as p:
        yield p


def kind():
    """Which kind of worker runs the calling task body ('cpu' / 'gpu')."""
    ctx = gpuflow.current_task()
    return ctx.env().kind if ctx else "not-in-gpuflow"


def tag(block, _=None):
    """A block op that records where it ran: +1 on GPU workers, +0 on CPU workers."""
    return block + (1 if kind() == "gpu" else 0)


def live_values_settled(baseline, timeout=5.0):
    deadline = time.monotonic() + timeout
    while gpuflow.live_values() > baseline and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.01)
    return gpuflow.live_values()


# ------------------------------------------------------------------------------------------
# Collections
# ------------------------------------------------------------------------------------------


def test_delayed(pool):
    @delayed
    def inc(x):
        return x + 1

    total = delayed(sum)([inc(i) for i in range(20)])
    assert total.compute(scheduler=get, pool=pool) == sum(range(1, 21))


def test_array_seed_workload(pool):
    x = da.random.RandomState(42).normal(10, 1, size=(2000, 2000), chunks=(500, 500))
    y = (x + 1)[::2, ::2].sum()
    assert np.isclose(y.compute(scheduler=get, pool=pool), y.compute(scheduler="sync"))


def test_array_values(pool):
    a = np.arange(100.0).reshape(10, 10)
    x = da.from_array(a, chunks=3)
    r = ((x.T @ x) - x.mean(axis=0)).compute(scheduler=get, pool=pool)
    np.testing.assert_allclose(r, (a.T @ a) - a.mean(axis=0))


def test_bag(pool):
    b = db.from_sequence(range(100), npartitions=7)
    assert b.map(lambda v: v * 2).filter(lambda v: v % 3).sum().compute(
        scheduler=get, pool=pool) == sum(v * 2 for v in range(100) if (v * 2) % 3)


def test_dataframe(pool):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    df = pd.DataFrame({"a": np.arange(200) % 7, "b": np.arange(200.0)})
    ddf = dd.from_pandas(df, npartitions=5)
    got = ddf.groupby("a").b.sum().compute(scheduler=get, pool=pool)
    pd.testing.assert_series_equal(got.sort_index(), df.groupby("a").b.sum())
    assert len(ddf[ddf.b > 50]) == 149


def test_dataframe_annotations_are_dropped_by_dask_and_delayed_partitions_keep_them(pool):
    """Under query planning (Dask's default for dataframes) Dask itself drops dask.annotate
    before any scheduler sees the graph, and warns; the documented way to place dataframe
    partitions is to annotate them as delayed objects."""
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    ddf = dd.from_pandas(pd.DataFrame({"x": np.zeros(40)}), npartitions=4)

    def tag_partition(part):
        return part.assign(x=part.x + (1 if kind() == "gpu" else 0))

    with pytest.warns(UserWarning, match="ignored when using query-planning"):
        with dask.annotate(resources={"GPU": 1}):
            tagged = ddf.map_partitions(tag_partition)
        assert tagged.x.sum().compute(scheduler=get, pool=pool) == 0  # ran on CPU workers

    with dask.annotate(resources={"GPU": 1}):
        parts = [delayed(tag_partition)(p) for p in ddf.to_delayed()]
    done = dask.compute(*parts, scheduler=get, pool=pool)
    assert pd.concat(done).x.sum() == 40  # every partition ran on a GPU worker
    # rebuilding a dataframe from them goes through query planning again, which drops them
    # (silently, this time)
    back = dd.from_delayed(parts, meta=ddf._meta)
    assert back.x.sum().compute(scheduler=get, pool=pool) == 0


def test_config_scheduler_and_pool(pool):
    x = da.ones((100, 100), chunks=25)
    with dask.config.set(scheduler=get, **{"gpuflow.pool": pool}):
        assert x.sum().compute() == 10000
        assert dask.compute(x.sum(), x.mean()) == (10000, 1)


def test_persist(pool):
    x = da.arange(100, chunks=10) * 2
    with dask.config.set(scheduler=get, **{"gpuflow.pool": pool}):
        y = x.persist()
        assert len(y.dask) == 10
        assert y.sum().compute() == 9900


def test_default_pool_is_lazy_and_shared():
    p1 = gpuflow.dask.default_pool()
    assert gpuflow.dask.default_pool() is p1
    assert delayed(add)(1, 2).compute(scheduler=get) == 3


def test_nested_keys_shape(pool):
    dsk = {"a": 1, "b": (add, "a", 1), "c": (add, "b", "b"), ("x", 0): (add, "c", 1)}
    assert get(dsk, "c", pool=pool) == 4
    assert get(dsk, ["a", ["b", ("x", 0)], [["c"]]], pool=pool) == (1, (2, 5), ((4,),))
    assert get(dsk, [], pool=pool) == ()


def test_alias_and_data_outputs(pool):
    from dask._task_spec import Alias, DataNode, Task, TaskRef
    dsk = {"d": DataNode("d", 5), "t": Task("t", add, TaskRef("d"), 1),
           "al": Alias("al", "t"), "al2": Alias("al2", "al")}
    assert get(dsk, ["d", "t", "al", "al2"], pool=pool) == (5, 6, 6, 6)


def test_missing_dependency_and_key(pool):
    from dask._task_spec import Task, TaskRef
    with pytest.raises(KeyError, match="zz"):
        get({"a": Task("a", add, TaskRef("zz"), 1)}, ["a"], pool=pool)
    with pytest.raises(KeyError):
        get({"a": 1}, ["nope"], pool=pool)


def test_values_released_after_compute(pool):
    from gpuflow._bodies import live_tables
    # Values of earlier tests may still be on their way out: let them go before the baseline.
    base = live_values_settled(0)
    graphs = live_tables()
    x = da.ones((1000, 1000), chunks=100)
    for _ in range(3):
        assert (x + 1).sum().compute(scheduler=get, pool=pool) == 2e6
    assert live_values_settled(base) <= base
    # Each graph's table goes with its C graph, which the thread that retires its last run may
    # release a moment after compute() returned.
    wait_until(lambda: live_tables() <= graphs, lambda: f"{live_tables()} tables, not {graphs}")
    assert live_tables() == graphs


def test_nested_compute_does_not_deadlock(pool):
    @delayed
    def outer(i):
        return delayed(add)(i, 1).compute(scheduler=get, pool=pool)

    assert sum(dask.compute(*[outer(i) for i in range(10)], scheduler=get, pool=pool)) == 55


# ------------------------------------------------------------------------------------------
# Annotations reach gpuflow as resources, priorities and retries
# ------------------------------------------------------------------------------------------


def test_delayed_gpu_annotation(pool):
    with dask.annotate(resources={"GPU": 1}):
        a = delayed(kind)()
    b = delayed(lambda _: kind())(a)
    assert dask.compute(a, b, scheduler=get, pool=pool) == ("gpu", "cpu")


def test_array_annotations_survive_default_optimization(pool):
    """CPU -> GPU=1 -> CPU on array blocks, with Dask's default optimization (which fuses
    the three blockwise layers and would drop the annotations)."""
    x = da.zeros((40, 40), chunks=10)
    a = x.map_blocks(tag, dtype=float)                       # CPU: +0
    with dask.annotate(resources={"GPU": 1}):
        b = a.map_blocks(tag, dtype=float)                   # GPU: +1
    c = (b * 10).map_blocks(tag, dtype=float)                # CPU: +0
    r = c.compute(scheduler=get, pool=pool)
    assert (r == 10).all(), np.unique(r)
    # the same graph on Dask's sync scheduler never runs inside gpuflow
    assert (c.compute(scheduler="sync") == 0).all()


def test_annotations_callable_and_user_labels(pool):
    x = da.zeros((20,), chunks=5)
    # a callable annotation, expanded per key: only the block (name, 0) asks for the GPU
    with dask.annotate(resources=lambda k: {"GPU": 1} if k[1] == 0 else {"bigmem": 1}):
        y = x.map_blocks(tag, dtype=float)
    r = y.compute(scheduler=get, pool=pool)
    assert list(r) == [1] * 5 + [0] * 15
    bigmem_peak = max(pool.ledger(w.index).get("bigmem", gpuflow.LedgerEntry("", 0, 0, 0))
                      .peak_in_use for w in pool.workers())
    assert bigmem_peak == 1


def test_retries_annotation(pool):
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise OSError("transient")
        return "ok"

    with dask.annotate(retries=2):
        t = delayed(flaky, pure=False)()
    assert t.compute(scheduler=get, pool=pool) == "ok" and len(calls) == 3

    calls.clear()
    t2 = delayed(flaky, pure=False)()
    with pytest.raises(OSError, match="transient"):
        t2.compute(scheduler=get, pool=pool)


def test_priority_annotation():
    order = []
    gate = threading.Event()
    with gpuflow.Pool(cpu_workers=1, emulated_devices=0) as one:
        blocker = delayed(lambda: gate.wait(5))()
        tasks = []
        for prio in (1, 7, 3, 9, 0):
            with dask.annotate(priority=prio):
                tasks.append(delayed(lambda _, p=prio: order.append(p), pure=False)(blocker))
        threading.Timer(0.1, gate.set).start()
        dask.compute(*tasks, scheduler=get, pool=one)
    assert order == [9, 7, 3, 1, 0]


def test_annotations_of_hlg_and_expr():
    x = da.ones((10,), chunks=5)
    with dask.annotate(resources={"GPU": 1}, priority=3):
        y = x + 1
    z = y.sum()
    graph, ann = gpuflow.dask.annotations_of(
        __import__("dask._expr", fromlist=["FinalizeCompute"]).FinalizeCompute(
            dask.base.collections_to_expr([z], True)).optimize())
    annotated = [k for k in ann["resources"] if isinstance(k, tuple) and k[0] == y.name]
    assert len(annotated) == 2 and all(ann["priority"][k] == 3 for k in annotated)
    assert all(k in graph for k in annotated)
    g2, ann2 = gpuflow.dask.annotations_of(y.__dask_graph__())  # a HighLevelGraph
    assert ann2["resources"][(y.name, 0)] == {"GPU": 1}


def test_infeasible_annotation_raises():
    with gpuflow.Pool(cpu_workers=1, emulated_devices=0) as cpu_only:
        with dask.annotate(resources={"GPU": 1}):
            t = delayed(kind)()
        with pytest.raises(gpuflow.InfeasibleError):
            t.compute(scheduler=get, pool=cpu_only)


def test_bad_resources_annotation(pool):
    with dask.annotate(resources=lambda k: "GPU"):  # callables are only checked when expanded
        t = delayed(kind)()
    with pytest.raises(TypeError, match="resources"):
        t.compute(scheduler=get, pool=pool)


# ------------------------------------------------------------------------------------------
# Errors and interrupts
# ------------------------------------------------------------------------------------------


class MyError(Exception):
    pass


def explode(x):
    raise MyError(f"exploded on {x}")


def test_exception_type_and_traceback(pool):
    a = delayed(add)(1, 2)
    b = delayed(explode)(a)
    c = delayed(add)(b, 1)
    with pytest.raises(MyError, match="exploded on 3") as e:
        c.compute(scheduler=get, pool=pool)
    assert "explode" in [f.name for f in traceback.extract_tb(e.value.__traceback__)]


def test_cost_keys_are_key_prefixes():
    from gpuflow.dask import _cost_key
    assert _cost_key("inc-123") == b"inc"
    assert _cost_key(("sum-abc0123", 0)) == b"sum"
    assert _cost_key("('ones_like-0f2a', 1, 2)") == b"ones_like"
    assert _cost_key("x") == b"x"


def test_array_exception(pool):
    x = da.ones((10,), chunks=5)
    with pytest.raises(ZeroDivisionError):
        x.map_blocks(lambda b: b / 0 if False else 1 // 0, dtype=float).compute(
            scheduler=get, pool=pool)


def test_keyboard_interrupt_cancels(pool):
    released = threading.Event()
    first = threading.Lock()
    started, ended = [], []

    def slow(i):
        # The first body to run presses Ctrl-C (as it were) once the main thread waits in
        # compute(); every body runs until both cancelled and let go by the test, which checks
        # in between that they still run. (120 s: a hang guard, past the test's waits.)
        ctx = gpuflow.current_task()
        started.append(i)
        if first.acquire(blocking=False):
            wait_until(main_thread_waits_for_a_run, "the main thread waits for the compute")
            _thread.interrupt_main()
        wait_until(lambda: ctx.cancelled() and released.is_set(), "cancelled and let go",
                   timeout=120)
        ended.append(i)
        return i

    tasks = [delayed(slow, pure=False)(i) for i in range(6)]
    with pytest.raises(KeyboardInterrupt):
        dask.compute(*tasks, scheduler=get, pool=pool)
    # raised at once: the running bodies (which cannot end before `released`) are not waited for
    assert started and not ended
    released.set()
    # each body that ran saw the cancellation and returned: cancelled, not run to the end
    wait_until(lambda: len(ended) == len(started), lambda: f"started {started}, ended {ended}")
    # the pool is free again: nothing left running
    assert delayed(add)(2, 2).compute(scheduler=get, pool=pool) == 4


def test_ctrl_c_in_a_long_body_interrupts_at_once_and_exits():
    """SIGINT while a body runs that does not end (600 s, past the test's patience):
    KeyboardInterrupt all the same, and the process is gone without waiting for the body."""
    import signal
    child = Child("""
        import threading, dask, gpuflow.dask
        from dask import delayed
        from waiting import main_thread_waits_for_a_run, wait_until
        running = []
        def body():
            running.append(1)
            wait_until(main_thread_waits_for_a_run, "the main thread waits for the compute")
            print("started", flush=True)
            threading.Event().wait(600)
            running.pop()
            return 1
        try:
            delayed(body)().compute(scheduler="gpuflow")
        except KeyboardInterrupt:
            print("interrupted with", len(running), "body running", flush=True)
            raise
    """, tty=False, stdout_too=True)
    try:
        assert child.read_until(b"started\n", 60), child.output
        child.proc.send_signal(signal.SIGINT)
        rc, out, _ = child.finish(60)  # reads to the end: the child exits, its body running
    finally:
        child.close()
    assert "\ninterrupted with 1 body running\n" in out, out
    assert rc != 0, out  # the KeyboardInterrupt went out of the script
    assert "KeyboardInterrupt" in out


# ------------------------------------------------------------------------------------------
# Task names, resource name hints
# ------------------------------------------------------------------------------------------


def test_errors_name_the_dask_key():
    with gpuflow.Pool(cpu_workers=1, emulated_devices=0) as cpu_only:
        with dask.annotate(resources={"GPU": 1}):
            x = da.ones((4, 4), chunks=2) + 1
        keys = [str(k) for k in dask.core.flatten(x.__dask_keys__())]
        with pytest.raises(gpuflow.InfeasibleError) as e:
            x.compute(scheduler=get, pool=cpu_only)
        msg = str(e.value)
        assert any(f"'{k}'" in msg for k in keys), msg  # "task '('add-...', 0, 0)' ..."
        assert "task #" not in msg


def test_task_names_are_keys_as_dask_prints_them():
    from gpuflow.dask import task_name
    assert task_name("inc-abc") == b"inc-abc"
    assert task_name(("x", 0, 1)) == b"('x', 0, 1)"
    # keys that print alike still make a valid graph (names are unique in a graph)
    dsk = {"('x', 0)": (add, 1, 1), ("x", 0): (add, 2, 2)}
    assert get(dsk, ["('x', 0)", ("x", 0)]) == (2, 4)


def test_task_error_names_the_failed_key(pool):
    from gpuflow.dask import build
    dsk = dask._task_spec.convert_legacy_graph({("x", 0): (explode, 1), "y": (add, ("x", 0), 1)})
    built = build(dsk, ["y"], {})
    run = built.graph.submit(pool)
    try:
        run.wait(10)
        y = built.graph._table.task_ids[[k for k in dsk].index("y")]
        p = ctypes.c_char_p()
        assert gpuflow._ffi.gf_run_task_error(ctypes.byref(p), run.handle, y) == 0
        assert "('x', 0)" in p.value.decode() and "#" not in p.value.decode()
    finally:
        run.close()
        built.graph.close()


def test_task_env_name_is_the_key(pool):
    def name():
        return gpuflow.current_task().env().name
    t = delayed(name, pure=True)(dask_key_name="my-key")
    assert t.compute(scheduler=get, pool=pool) == "my-key"


def test_resource_name_case_hint(pool):
    with dask.annotate(resources={"gpu": 1}):
        t = delayed(kind)(dask_key_name="needs-gpu")
    with pytest.raises(gpuflow.InfeasibleError, match=r"needs-gpu.*'gpu'.*did you mean 'GPU'"):
        t.compute(scheduler=get, pool=pool)
    with dask.annotate(resources={"BIGMEM": 1}):
        t = delayed(kind)()
    with pytest.raises(gpuflow.InfeasibleError, match="did you mean 'bigmem'"):
        t.compute(scheduler=get, pool=pool)
    assert {"cpu", "GPU", "gpu_memory", "bigmem"} <= pool.resource_names()


# ------------------------------------------------------------------------------------------
# Dask's diagnostics and callbacks; the "gpuflow" scheduler name
# ------------------------------------------------------------------------------------------


def in_gpuflow(x=None):
    return gpuflow.current_task() is not None


def test_named_scheduler(pool):
    assert dask.base.named_schedulers["gpuflow"] is get
    t = delayed(in_gpuflow)()
    assert t.compute(scheduler="gpuflow", pool=pool) is True
    with dask.config.set(scheduler="gpuflow", **{"gpuflow.pool": pool}):
        assert t.compute() is True
        assert dask.base.get_scheduler() is get
    assert t.compute(scheduler="sync") is False


def test_progress_bar(pool, capsys):
    from dask.diagnostics import ProgressBar
    x = (da.ones((8, 8), chunks=2) + 1).sum()
    with ProgressBar():
        assert x.compute(scheduler="gpuflow", pool=pool) == 128
    out = capsys.readouterr().out
    assert "100% Completed" in out and "#" * 40 in out


def test_profiler_one_entry_per_task(pool):
    from dask.diagnostics import CacheProfiler, Profiler
    x = (da.ones((8, 8), chunks=2) + 1).sum()
    with Profiler() as ref:
        x.compute(scheduler="sync")
    with Profiler() as prof, CacheProfiler() as cache:
        assert x.compute(scheduler="gpuflow", pool=pool) == 128
    keys = [r.key for r in prof.results]
    assert len(keys) == len(set(keys)) == len(ref.results)
    # the same keys, but for the finalize keys, whose names change with each compute
    def stable(ks):
        return {k for k in ks if "finalize" not in str(k)}
    assert stable(keys) == stable(r.key for r in ref.results) and len(stable(keys)) > 10
    names = {w.name for w in pool.workers()}
    assert all(r.worker_id in names and r.end_time >= r.start_time for r in prof.results)
    assert {r.key for r in cache.results} == set(keys)


def test_callback_subclass(pool):
    from dask.callbacks import Callback
    main = threading.get_ident()
    calls = []

    class Record(Callback):
        def _start(self, dsk):
            calls.append(("start", threading.get_ident()))

        def _start_state(self, dsk, state):
            calls.append(("start_state", len(state["ready"]) + len(state["waiting"])))

        def _pretask(self, key, dsk, state):
            calls.append(("pretask", key, threading.get_ident()))

        def _posttask(self, key, result, dsk, state, worker_id):
            calls.append(("posttask", key, result, worker_id, threading.get_ident()))

        def _finish(self, dsk, state, failed):
            calls.append(("finish", failed, len(state["finished"])))

    a = delayed(add)(1, 2, dask_key_name="a")
    b = delayed(add)(a, 10, dask_key_name="b")
    with Record():
        assert b.compute(scheduler="gpuflow", pool=pool) == 13
    assert calls[0] == ("start", main) and calls[1] == ("start_state", 2)
    assert calls[-1] == ("finish", False, 2)
    pre = [c for c in calls if c[0] == "pretask"]
    post = [c for c in calls if c[0] == "posttask"]
    assert [c[1] for c in pre] == ["a", "b"] and all(c[2] == main for c in pre)
    assert [(c[1], c[2]) for c in post] == [("a", 3), ("b", 13)]
    assert all(c[3].startswith("cpu:") and c[4] == main for c in post)
    # a failing graph: finish(failed=True); callbacks passed as an argument work too
    seen = []
    cb = (None, None, None, None, lambda dsk, state, failed: seen.append(failed))
    with pytest.raises(MyError):
        delayed(explode)(1).compute(scheduler="gpuflow", pool=pool, callbacks=[cb])
    assert seen == [True]
    assert not Callback.active  # restored


# ------------------------------------------------------------------------------------------
# The Dask test-suite plugin
# ------------------------------------------------------------------------------------------


def test_readme_lists_exactly_the_plugin_exclusions():
    import gpuflow_dask_pytest as plugin
    with open(os.path.join(HERE, "..", "README.md")) as f:
        readme = f.read()
    section = readme.split("## Excluded tests", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([^`]+)` \|", section, re.M))
    assert listed == set(plugin.EXCLUDED)


def test_seed_notebook_example():
    """examples/python/seed_notebook.py runs and checks itself (small size)."""
    import subprocess
    import sys
    root = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
    p = subprocess.run([sys.executable, os.path.join(root, "examples", "python",
                                                      "seed_notebook.py"), "2000", "500"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.rstrip().endswith("ok")


@pytest.mark.parametrize("args", [["gpuflow", "tree", "256", "1"],
                                  ["gpuflow", "seed", "1000", "500", "1"]])
def test_benchmark_smoke(args):
    """bench/python/bench_dask.py still runs (tiny sizes, gpuflow only)."""
    import json
    import subprocess
    import sys
    root = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
    p = subprocess.run([sys.executable, os.path.join(root, "bench", "python", "bench_dask.py"),
                        "--one", *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["peer"] == "gpuflow" and r["median_s"] > 0
