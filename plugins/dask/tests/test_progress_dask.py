"""gpuflow.dask.get's progress bar: shown on a terminal for computations that last, silent in a
pipe, and never next to a Dask ProgressBar (one bar, not two). Computations run in child
processes whose output is a pseudo-terminal or a pipe."""
import re

import pytest

from terminal_child import Child, interrupt_while_drawing, run  # (conftest.py: on sys.path)

OURS = re.compile(r"\r\[[#.]{30}\] +\d+% \d+/\d+ tasks")
DASKS = re.compile(r"\r\[[# ]{40}\] \| +\d+% Completed")


def compute_code(keys=40, seconds=0.05, progress_bar=False, setup="", **compute_kwargs):
    """dask.compute of `keys` delayed sleeps of `seconds` on a one-worker pool (40 x 50 ms: ~2 s),
    with scheduler="gpuflow"; inside ``with ProgressBar():`` when progress_bar."""
    kwargs = "".join(f", {k}={v!r}" for k, v in compute_kwargs.items())
    compute = f'dask.compute(*xs, scheduler="gpuflow", pool=pool{kwargs})'
    if progress_bar:
        compute = f"""
        from dask.diagnostics import ProgressBar
        with ProgressBar():
            {compute}"""
    return f"""
        import time, dask, gpuflow, gpuflow.dask
        from dask import delayed
        {setup}
        pool = gpuflow.Pool(cpu_workers=1, emulated_devices=0)
        xs = [delayed(time.sleep, pure=False)({seconds}) for i in range({keys})]
        {compute}
        print("computed", flush=True)
    """


def test_compute_on_a_terminal_shows_gpuflows_bar():
    rc, out, _ = run(compute_code(), stdout_too=True)
    assert rc == 0 and "computed" in out, out
    assert len(OURS.findall(out)) >= 2, out
    final = out.rsplit("\r[", 1)[1]
    assert re.match(r"#{30}\] 100% 40/40 tasks  \d+\.\d tasks/s  ETA 0\.0 s", final), out
    assert not DASKS.search(out)


def test_with_a_dask_progressbar_only_dasks_bar_shows():
    rc, out, _ = run(compute_code(progress_bar=True), stdout_too=True)  # Dask's goes to stdout
    assert rc == 0 and "computed" in out, out
    assert DASKS.search(out) and "100% Completed" in out, out
    assert not OURS.search(out) and "tasks/s" not in out, out


def test_progress_true_with_a_dask_callback_shows_both():
    """Asked for explicitly, gpuflow's bar is drawn also while Dask's callbacks run (the path
    that reports to them)."""
    rc, out, _ = run(compute_code(progress_bar=True, progress=True), tty=False,
                     stdout_too=True)
    assert rc == 0 and "computed" in out, out
    assert "progress: 40/40 tasks (100%), 0 failed" in out, out  # Dask's bar shares the line
    assert "100% Completed" in out


@pytest.mark.parametrize("how", ["pipe", "progress=False", "dask.config", "env"])
def test_silent(how):
    kwargs, setup, env, tty = {}, "", {}, True
    if how == "pipe":
        tty = False
    elif how == "progress=False":
        kwargs["progress"] = False
    elif how == "dask.config":
        setup = 'dask.config.set({"gpuflow.progress": False})'
    else:
        env["GPUFLOW_PROGRESS"] = "0"
    rc, out, _ = run(compute_code(setup=setup, **kwargs), tty=tty, stdout_too=True, **env)
    assert rc == 0 and out.replace("\r\n", "\n") == "computed\n", out


def test_a_short_compute_on_a_terminal_shows_nothing():
    rc, out, _ = run(compute_code(keys=10), stdout_too=True)  # ~0.5 s: under 1 s
    assert rc == 0 and out.replace("\r\n", "\n") == "computed\n", out


def test_ctrl_c_with_the_bar_shown_cancels_at_once_and_ends_the_line():
    # The bodies are never let go: the process exits with one still running (600 s, past any
    # test's patience), as a Ctrl-C'd program does when its pool is not closed.
    child = Child("""
        import sys, threading, dask, gpuflow, gpuflow.dask
        from dask import delayed
        never = threading.Event()
        started, ended = [], []
        def body(i):
            started.append(i)
            sys.stderr.write("body started\\n")
            never.wait(600)
            ended.append(i)
        pool = gpuflow.Pool(cpu_workers=1, emulated_devices=0)
        xs = [delayed(body, pure=False)(i) for i in range(400)]
        try:
            dask.compute(*xs, scheduler="gpuflow", pool=pool)
        except KeyboardInterrupt:
            print("interrupted", len(started), len(ended), flush=True)
            sys.stderr.write("AFTER\\n")
    """)
    interrupt_while_drawing(child, OURS)
