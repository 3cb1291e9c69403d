"""Tests of the ctypes binding: pools, graphs, runs, futures, errors, value lifetimes."""
import _thread
import asyncio
import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import traceback
import weakref

import pytest

import gpuflow
from terminal_child import Child, child_env
from waiting import main_thread_waits_for_a_run, wait_until


def settle_values(baseline: int, timeout: float = 5.0) -> int:
    """Waits until gpuflow holds `baseline` Python values again (destructors may run on worker
    threads shortly after a run finishes); returns the final count."""
    deadline = time.monotonic() + timeout
    while True:
        gc.collect()
        n = gpuflow.live_values()
        if n <= baseline or time.monotonic() > deadline:
            return n
        time.sleep(0.01)


class Obj:
    """A weak-referenceable payload, to watch when gpuflow releases a value."""

    def __init__(self, v):
        self.v = v


# ------------------------------------------------------------------------------------------
# Library and pools
# ------------------------------------------------------------------------------------------


def test_version_and_library():
    assert gpuflow.version().count(".") == 2
    assert os.path.exists(gpuflow.library_path)


def test_pool_config_knobs():
    with gpuflow.Pool(cpu_workers=3, emulated_devices=1, device_memory=32 << 20,
                      cpu_labels={"bigmem": 2}, gpu_labels={"fast": 1}, backend="host") as p:
        ws = p.workers()
        assert [w.kind for w in ws] == ["cpu"] * 3 + ["gpu"]
        assert ws[3].emulated and ws[3].device == 0 and ws[0].device == -1
        assert p.ledger(0)["bigmem"].capacity == 2
        assert p.ledger(0)["cpu"].capacity == 1
        gpu = p.ledger(3)
        assert gpu["GPU"].capacity == 1 and gpu["fast"].capacity == 1
        assert gpu["gpu_memory"].capacity == 32 << 20
        assert "cpu:0" in repr(p)


def test_pool_without_devices():
    with gpuflow.Pool(cpu_workers=1, emulated_devices=0) as p:
        assert [w.kind for w in p.workers()] == ["cpu"]


def test_pool_closed_and_invalid_arguments():
    p = gpuflow.Pool(cpu_workers=1, emulated_devices=0)
    p.close()
    p.close()  # idempotent
    assert p.closed
    with pytest.raises(gpuflow.StateError):
        p.workers()
    with pytest.raises(ValueError):
        gpuflow.Pool(backend="quantum")
    with pytest.raises(ValueError):
        gpuflow.Pool(cpu_workers=0)


def test_pool_error_carries_gpuflow_message():
    with pytest.raises(gpuflow.InvalidArgumentError) as e:
        gpuflow.Pool(cpu_workers=1, cpu_labels={"bad": -1.0})
    assert e.value.status == -1 and e.value.status_name == "GF_ERR_INVALID_ARGUMENT"
    assert "bad" in str(e.value) or "label" in str(e.value)


# ------------------------------------------------------------------------------------------
# One-off tasks and graphs
# ------------------------------------------------------------------------------------------


def test_submit_one_off(pool):
    f = pool.submit(lambda: 10 + 1)
    assert f.result() == 11
    assert f.done() and f.exception() is None
    assert pool.submit(pow, 2, 10).result() == 1024
    assert pool.submit(lambda a, b=0: a - b, 5, b=f).result() == -6  # futures resolved


def test_map(pool):
    fs = pool.map(lambda a, b: a * b, range(10), range(10))
    assert [f.result() for f in fs] == [i * i for i in range(10)]


def test_graph_dependencies_and_kwargs(pool):
    g = gpuflow.Graph()
    a = g.task(lambda: 3, name="a")
    b = g.task(lambda: 4, name="b")
    host = g.value([1, 2, 3], name="host")
    c = g.task(lambda x, y, z=None: x * y + sum(z), a, b, z=host, name="c", keep=True)
    d = g.task(lambda c: c + 1, c, keep=True)
    assert len(g) == 4
    with pool.run(g) as run:
        assert run.result() is None
        assert run.value(d) == 3 * 4 + 6 + 1
        assert run[c] == 18 and run.value(host) == [1, 2, 3]
        assert run.state == "succeeded"
        assert run.task_state(c) == "succeeded" and run.task_attempts(c) == 1
        s = run.stats()
        assert s.tasks == 4 and s.succeeded == 4 and s.failed == 0


def test_graph_resubmitted(pool):
    g = gpuflow.Graph()
    t = g.task(lambda: Obj(5))
    r1, r2 = pool.run(g), pool.run(g)
    r1.result(), r2.result()
    assert r1.value(t).v == r2.value(t).v == 5
    assert r1.value(t) is not r2.value(t)
    with pytest.raises(gpuflow.StateError):
        g.task(lambda: 1)  # frozen by submit


def test_after_edges_order(pool):
    order, submitted, seen = [], {}, {}

    def first_body():
        # While it runs, the task after it waits for it (neither queued nor run beside it).
        wait_until(lambda: "run" in submitted, "the run is submitted")
        seen["second"] = submitted["run"].task_state(second)
        order.append("first")

    g = gpuflow.Graph()
    first = g.task(first_body)
    second = g.task(lambda: order.append("second"), after=[first])
    submitted["run"] = run = pool.run(g)
    run.result()
    assert seen == {"second": "waiting"}
    assert order == ["first", "second"]


def test_intermediate_data_is_freed(pool):
    g = gpuflow.Graph()
    a = g.task(lambda: 1)
    b = g.task(lambda x: x + 1, a)
    with pool.run(g) as run:
        run.result()
        with pytest.raises(gpuflow.StateError, match="GF_DATA_KEEP|freed"):
            run.value(a)
        assert run.value(b) == 2


def test_foreign_data_rejected(pool):
    g1, g2 = gpuflow.Graph(), gpuflow.Graph()
    t = g1.task(lambda: 1)
    with pytest.raises(ValueError):
        g2.task(lambda x: x, t)
    with pytest.raises(TypeError):
        g1.task(42)


# ------------------------------------------------------------------------------------------
# Resources, placement, priorities, retries
# ------------------------------------------------------------------------------------------


def where():
    env = gpuflow.current_task().env()
    return env.kind, env.device, env.worker


def test_gpu_resource_runs_on_gpu_worker(pool):
    g = gpuflow.Graph()
    cpu = g.task(where)
    gpu = g.task(where, resources={"GPU": 1})
    half = g.task(where, resources={"GPU": 0.5, "gpu_memory": 1 << 20})
    with pool.run(g) as run:
        run.result()
        assert run.value(cpu)[0] == "cpu"
        kind, device, worker = run.value(gpu)
        assert kind == "gpu" and device >= 0
        assert pool.workers()[run.task_worker(gpu)].kind == "gpu"
        assert worker == run.task_worker(gpu)
        assert run.value(half)[0] == "gpu"


def test_where_any_and_cpu(pool):
    g = gpuflow.Graph()
    ts = [g.task(where, where="any") for _ in range(20)]
    with pool.run(g) as run:
        run.result()
        assert {run.value(t)[0] for t in ts} <= {"cpu", "gpu"}
    with pytest.raises(ValueError):
        gpuflow.Graph().task(where, where="tpu")


def test_user_label_placement():
    with gpuflow.Pool(cpu_workers=2, emulated_devices=1, gpu_labels={"bigmem": 1}) as p:
        g = gpuflow.Graph()
        t = g.task(where, resources={"bigmem": 1}, where="any")
        with p.run(g) as run:
            run.result()
            assert run.value(t)[0] == "gpu"  # only the GPU worker advertises bigmem
        assert p.ledger(2)["bigmem"].peak_in_use == 1
        assert p.ledger(2)["bigmem"].in_use == 0


def test_infeasible_names_the_task():
    with gpuflow.Pool(cpu_workers=1, emulated_devices=0) as p:
        g = gpuflow.Graph()
        g.task(lambda: 1, resources={"GPU": 1}, name="needs-gpu")
        with pytest.raises(gpuflow.InfeasibleError, match="needs-gpu") as e:
            p.run(g)
        assert isinstance(e.value, gpuflow.GpuflowError) and e.value.status == -6


def test_invalid_resource_amount():
    g = gpuflow.Graph()
    with pytest.raises(gpuflow.InvalidArgumentError):
        g.task(lambda: 1, resources={"cpu": -1})


def test_cycle_is_invalid_graph(pool):
    g = gpuflow.Graph()
    a = g.task(lambda: 1, name="a")
    b = g.task(lambda: 2, name="b", after=[a])
    g.after(a, b)
    with pytest.raises(gpuflow.InvalidGraphError, match="cycle|'a'|'b'"):
        pool.run(g)


def test_priority_orders_ready_tasks():
    with gpuflow.Pool(cpu_workers=1, emulated_devices=0) as p:
        order = []
        gate = threading.Event()
        g = gpuflow.Graph()
        blocker = g.task(lambda: gate.wait(60))
        for prio in (1, 5, 3, 9, 0):
            g.task(order.append, prio, priority=prio, after=[blocker])
        run = p.run(g)
        # The five wait behind the running blocker: all become ready together when it ends.
        wait_until(lambda: run.task_state(blocker) == "running", "the blocker runs")
        gate.set()
        run.result()
        assert order == [9, 5, 3, 1, 0]


def test_retries_then_success(pool):
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError(f"attempt {len(calls)}")
        return "ok"

    g = gpuflow.Graph()
    t = g.task(flaky, retries=2)
    with pool.run(g) as run:
        run.result()
        assert run.value(t) == "ok" and run.task_attempts(t) == 3


def test_retries_exhausted_last_error_surfaces(pool):
    calls = []

    def always():
        calls.append(1)
        raise KeyError(f"attempt {len(calls)}")

    g = gpuflow.Graph()
    t = g.task(always, retries=1, name="always")
    run = pool.run(g)
    with pytest.raises(KeyError, match="attempt 2"):
        run.result()
    assert run.task_attempts(t) == 2 and run.task_state(t) == "failed"
    assert "attempt 2" in run.task_error(t) and "KeyError" in run.task_error(t)


# ------------------------------------------------------------------------------------------
# Exceptions
# ------------------------------------------------------------------------------------------


class CustomError(Exception):
    pass


def deep_failure(x):
    def inner():
        raise CustomError(f"bad value {x}")
    inner()


def test_task_exception_original_type_and_traceback(pool):
    g = gpuflow.Graph()
    a = g.task(lambda: 7)
    b = g.task(deep_failure, a, name="fails")
    c = g.task(lambda x: x, b)
    run = pool.run(g)
    with pytest.raises(CustomError, match="bad value 7") as e:
        run.result()
    frames = [f.name for f in traceback.extract_tb(e.value.__traceback__)]
    assert "deep_failure" in frames and "inner" in frames
    assert run.state == "failed"
    assert run.task_state(c) == "failed" and "dependency" in run.task_error(c)
    assert "CustomError: bad value 7" in run.task_error(b)
    assert isinstance(run.exception(), CustomError)


def test_task_error_is_the_python_error_without_internal_tags(pool):
    g = gpuflow.Graph()
    a = g.task(deep_failure, 5, name="fails")
    b = g.task(lambda: 1 / 0)
    run = pool.run(g)
    with pytest.raises((CustomError, ZeroDivisionError)):
        run.result()
    assert run.task_error(a) == "test_binding.CustomError: bad value 5"
    assert run.task_error(b) == "ZeroDivisionError: division by zero"
    # The run's summary (TaskFailedError when the exception cannot be re-raised) is clean too.
    run.close()
    with pytest.raises((CustomError, ZeroDivisionError, gpuflow.TaskFailedError)) as e:
        run.result()
    assert "python exception" not in str(e.value)


def test_first_failed_task_exception_is_raised(pool):
    submitted = {}

    def late():  # fails only once `first` has failed
        wait_until(lambda: "run" in submitted and submitted["run"].task_state(first) == "failed",
                   "the first task fails")
        raise KeyError("late")

    g = gpuflow.Graph()
    g.task(late)
    first = g.task(deep_failure, 1)
    run = submitted["run"] = pool.run(g)
    with pytest.raises(CustomError, match="bad value 1"):
        run.result()
    assert run.task_state(first) == "failed"


def alpha():
    """Slow on CPU workers, fast on GPU workers."""
    where = gpuflow.current_task().env().kind
    if where == "cpu":
        time.sleep(0.1)
    return where


def beta():
    """Fast on CPU workers, slow on GPU workers."""
    where = gpuflow.current_task().env().kind
    if where == "gpu":
        time.sleep(0.1)
    return where


def test_callables_have_their_own_duration_estimates():
    # Every Python task has the same C body; the cost key (the callable's qualified name) is
    # what keeps alpha's and beta's estimates apart. With one shared estimate both would be
    # placed on the same kind of worker (the GPU, given this learning order).
    with gpuflow.Pool(cpu_workers=1, emulated_devices=1, backend="host") as p:
        assert p.submit(alpha, where="cpu").result() == "cpu"
        assert p.submit(alpha, resources={"GPU": 1}).result() == "gpu"
        assert p.submit(beta, where="cpu").result() == "cpu"
        assert p.submit(beta, resources={"GPU": 1}).result() == "gpu"
        for _ in range(3):
            assert p.submit(alpha, where="any").result() == "gpu"
            assert p.submit(beta, where="any").result() == "cpu"


class Scaler:
    def __call__(self, x):
        return 2 * x

    def method(self, x):
        return x


def test_cost_keys_of_callables():
    import functools

    from gpuflow._bodies import cost_key_of, cost_key_text

    assert cost_key_of(alpha) == b"test_binding.alpha"
    assert cost_key_of(alpha) != cost_key_of(beta)
    assert cost_key_of(functools.partial(alpha)) == cost_key_of(alpha)
    assert cost_key_of(Scaler()) == b"test_binding.Scaler"
    assert cost_key_of(Scaler().method) == b"test_binding.Scaler.method"
    f = lambda: 1  # noqa: E731
    g = (
        lambda: 2)
    assert cost_key_of(f) != cost_key_of(g)
    assert cost_key_of(f).startswith(b"test_binding.test_cost_keys_of_callables.<locals>.<lambda>:")
    assert cost_key_of(len) == b"builtins.len"
    assert cost_key_text("tab\there\n") == b"tab?here?"
    assert len(cost_key_text("\u00e9" * 5000)) <= 4096
    assert cost_key_text("") == b"?"


def test_future_exception(pool):
    f = pool.submit(lambda: 1 / 0)
    assert isinstance(f.exception(), ZeroDivisionError)
    with pytest.raises(ZeroDivisionError):
        f.result()


def test_base_exceptions_do_not_escape_into_c(pool):
    def exits():
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        pool.submit(exits).result()
    assert pool.submit(lambda: "still fine").result() == "still fine"


def test_exception_with_broken_str(pool):
    class Weird(Exception):
        def __str__(self):
            raise RuntimeError("no str")

    with pytest.raises(Weird):
        pool.submit(lambda: (_ for _ in ()).throw(Weird())).result()


def test_timeout(pool):
    gate = threading.Event()
    f = pool.submit(lambda: gate.wait(5))
    with pytest.raises(TimeoutError):
        f.result(timeout=0.05)
    assert not f.run.wait(0.01)
    gate.set()
    assert f.result(timeout=5) is True


# ------------------------------------------------------------------------------------------
# Value lifetimes (reference counting) and the GIL
# ------------------------------------------------------------------------------------------


def test_values_released_when_gpuflow_frees_them(pool):
    base = settle_values(gpuflow.live_values())
    refs = {}

    def make(name):
        o = Obj(name)
        refs[name] = weakref.ref(o)
        return o

    gate = threading.Event()
    g = gpuflow.Graph()
    host_obj = Obj("host")
    host_ref = weakref.ref(host_obj)
    h = g.value(host_obj)
    del host_obj
    a = g.task(make, "a")
    b = g.task(lambda x, hv: (gate.wait(5), make("b"))[1], a, h)
    c = g.task(lambda x: make("c"), b, keep=True)
    run = pool.run(g)
    run.result()
    gate.set()
    # consumed intermediates are gone while the run still lives; the kept output is not
    wait_until(lambda: refs["a"]() is None and refs["b"]() is None,
               "the consumed intermediates are released")
    assert run.value(c).v == "c"
    assert host_ref() is not None  # host values live with the graph
    run.close()
    g.close()
    del run, g, h
    assert settle_values(base) == base
    assert refs["c"]() is None and host_ref() is None


def test_failed_attempt_values_and_specs_released(pool):
    base = settle_values(gpuflow.live_values())
    big = Obj("captured")
    ref = weakref.ref(big)
    g = gpuflow.Graph()
    g.task(lambda o: 1 / 0, g.value(big))
    del big
    run = pool.run(g)
    with pytest.raises(ZeroDivisionError):
        run.result()
    run.close()
    g.close()
    del run, g
    assert settle_values(base) == base
    gc.collect()
    assert ref() is None


def test_many_threads_share_one_pool(pool):
    results = []
    errors = []

    def client(i):
        try:
            g = gpuflow.Graph()
            ts = [g.task(lambda k=k: k * i) for k in range(50)]
            s = g.task(lambda *xs: sum(xs), *ts)
            with pool.run(g) as r:
                r.result()
                results.append((i, r.value(s)))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(results) == [(i, i * sum(range(50))) for i in range(8)]


def test_bodies_mutate_shared_state_under_gil(pool):
    counter = {"n": 0}

    def bump():
        for _ in range(100):
            counter["n"] += 1

    g = gpuflow.Graph()
    for _ in range(200):
        g.task(bump, where="any")
    pool.run(g).result()
    # with the GIL held by each callback, only thread switches inside bodies could race;
    # the total stays exact because every body runs its loop under the GIL's protection
    assert counter["n"] == 20000


def test_ledger_returns_to_zero(pool):
    g = gpuflow.Graph()
    for _ in range(10):
        g.task(lambda: time.sleep(0.001), resources={"GPU": 1, "gpu_memory": 1 << 20})
    with pool.run(g) as run:
        run.result()
    for w in pool.workers():
        for e in pool.ledger(w.index).values():
            assert e.in_use == 0 and e.peak_in_use <= e.capacity


# ------------------------------------------------------------------------------------------
# Cancellation, Ctrl-C, event loops, interpreter exit
# ------------------------------------------------------------------------------------------


def long_body(seconds=120.0):
    """Runs until cancelled; `seconds` (longer than any wait of the tests) is a hang guard, so a
    run that ends within a test's wait ended because the body saw the cancellation."""
    deadline = time.monotonic() + seconds
    ctx = gpuflow.current_task()
    while time.monotonic() < deadline and not ctx.cancelled():
        time.sleep(0.005)
    return ctx.cancelled()


def test_cancel(pool):
    g = gpuflow.Graph()
    a = g.task(long_body)
    b = g.task(lambda x: x, a)
    run = pool.run(g)
    wait_until(lambda: run.task_state(a) == "running", "the body runs")
    run.cancel()
    with pytest.raises(gpuflow.CancelledError):
        run.result(timeout=60)  # the body saw the cancellation: it would run 120 s otherwise
    assert run.state == "cancelled"
    assert run.task_state(b) == "cancelled"


def test_keyboard_interrupt_cancels_the_run(pool):
    released = threading.Event()

    def body():
        # Ctrl-C (as it were) once the main thread waits in run.result(); then run until both
        # cancelled and let go by the test, which checks in between that it still runs.
        ctx = gpuflow.current_task()
        wait_until(main_thread_waits_for_a_run, "the main thread waits for the run")
        _thread.interrupt_main()
        wait_until(lambda: ctx.cancelled() and released.is_set(), "cancelled and let go",
                   timeout=120)
        return ctx.cancelled()

    g = gpuflow.Graph()
    t = g.task(body)
    run = pool.run(g)
    with pytest.raises(KeyboardInterrupt):
        run.result()
    # raised at once: the running body (which cannot end before `released`) is not waited for
    assert run.task_state(t) == "running"
    released.set()
    assert run.wait(60)  # the body sees gf_task_ctx_cancelled and returns: cancelled, not ended
    assert run.state == "cancelled"
    # the running body saw gf_task_ctx_cancelled and returned early (so it succeeded)
    assert run.task_state(t) == "succeeded" and run.value(t) is True
    assert pool.submit(lambda: "alive").result(timeout=60) == "alive"


def test_ctrl_c_in_run_result_does_not_wait_for_the_body():
    """SIGINT while Run.result() waits on a body that does not end (600 s, past the test's
    patience): KeyboardInterrupt all the same, and the process exits (the pool's destruction at
    exit does not wait for the body)."""
    import signal
    child = Child("""
        import threading, gpuflow
        from waiting import main_thread_waits_for_a_run, wait_until
        def body():
            wait_until(main_thread_waits_for_a_run, "the main thread waits for the run")
            print("started", flush=True)
            threading.Event().wait(600)
        pool = gpuflow.Pool(cpu_workers=1, emulated_devices=0)
        g = gpuflow.Graph()
        t = g.task(body)
        run = pool.run(g)
        try:
            run.result()
        except KeyboardInterrupt:
            print("interrupted while the body is", run.task_state(t), flush=True)
    """, tty=False, stdout_too=True)
    try:
        assert child.read_until(b"started\n", 60), child.output
        child.proc.send_signal(signal.SIGINT)
        rc, out, _ = child.finish(60)  # reads to the end: the child exits, its body running
    finally:
        child.close()
    assert rc == 0 and "\ninterrupted while the body is running\n" in out, out


def test_fileno_and_await(pool):
    async def main():
        g = gpuflow.Graph()
        t = g.task(lambda: (time.sleep(0.05), 42)[1])
        run = pool.run(g)
        assert run.fileno() >= 0
        await run
        return run.value(t)

    assert asyncio.run(main()) == 42


def test_current_task_outside_body():
    assert gpuflow.current_task() is None


def _run_script(code, timeout=60):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=child_env())


def test_interpreter_exit_with_running_tasks_does_not_deadlock():
    p = _run_script("""
        import threading, time, gpuflow
        started = threading.Event()
        def body():
            started.set()
            time.sleep(0.02)
        pool = gpuflow.Pool(cpu_workers=2, emulated_devices=1)
        g = gpuflow.Graph()
        for i in range(50):
            g.task(body, where="any")
        run = pool.run(g)
        assert started.wait(60)  # the run's bodies have begun: ~50 x 20 ms of them are left
        print("exiting", flush=True)
        # neither the run nor the pool is closed: atexit finalizers must do it
    """)
    assert p.returncode == 0, p.stderr
    assert "exiting" in p.stdout


def test_interpreter_exit_with_values_and_graphs_alive():
    p = _run_script("""
        import gpuflow
        pool = gpuflow.Pool(cpu_workers=1, emulated_devices=0)
        g = gpuflow.Graph()
        t = g.task(lambda v: [v] * 10, g.value("x"))
        run = pool.run(g)
        run.result()
        keep = run.value(t)
        f = pool.submit(lambda: 1)
        import sys; sys.exit(0)
    """)
    assert p.returncode == 0, p.stderr


def test_pool_dropped_inside_a_task_does_not_deadlock():
    p = _run_script("""
        import gpuflow
        outer = gpuflow.Pool(cpu_workers=1, emulated_devices=0)
        def body():
            inner = gpuflow.Pool(cpu_workers=1, emulated_devices=0)
            del inner          # finalizer runs on a worker thread of `outer`
            return "ok"
        print(outer.submit(body).result(timeout=20))
        outer.close()
    """)
    assert p.returncode == 0, p.stderr
    assert "ok" in p.stdout
