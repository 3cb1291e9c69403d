"""The progress bar of runs (gpuflow._progress): shown on a terminal or in a notebook for runs
that last, silent in pipes and batch jobs unless asked for. Runs happen in child processes
whose stderr is a pseudo-terminal or a pipe (terminal_child)."""
import io
import re
import sys
import types

import pytest

from gpuflow import RunStats, _progress
from terminal_child import Child, interrupt_while_drawing, run

BAR = re.compile(r"\r\[[#.]{30}\] +\d+% \d+/\d+ tasks")


def graph_code(tasks=40, seconds=0.05, progress=None, fail=False):
    """A run of `tasks` bodies sleeping `seconds` each on one worker (40 x 50 ms: ~2 s), plus one
    that raises when `fail`; prints "result" and the run's exception to stdout."""
    return f"""
        import time, gpuflow
        def boom():
            raise ValueError("boom")
        with gpuflow.Pool(cpu_workers=1, emulated_devices=0) as pool:
            g = gpuflow.Graph()
            for i in range({tasks}):
                g.task(time.sleep, {seconds})
            if {fail}:
                g.task(boom)
            run = pool.run(g, progress={progress})
            print("result", repr(run.exception()), flush=True)
    """


def test_a_long_run_on_a_terminal_shows_a_bar_redrawn_in_place():
    rc, out, stdout = run(graph_code())
    assert rc == 0 and "result None" in stdout, out
    bars = BAR.findall(out)
    assert len(bars) >= 2, out  # redrawn while running, not only at the end
    final = out.rsplit("\r[", 1)[1]
    assert final.startswith("##############################] 100% 40/40 tasks"), out
    elapsed = re.search(r"\d+\.\d tasks/s  ETA 0\.0 s  elapsed (\d+\.\d) s", final)
    assert elapsed, out
    # Redrawn at most every REDRAW_S once the run has lasted MINIMUM_S, then once at the end,
    # not once per wait slice: counted against the run's own elapsed time (the final bar's,
    # rounded to 0.1 s), however long a loaded machine made the run last.
    most = (float(elapsed.group(1)) + 0.05 - _progress.MINIMUM_S) / _progress.REDRAW_S + 2
    assert len(bars) <= most, (len(bars), most, out)
    assert "failed" not in final
    assert out.endswith("\n"), repr(out[-80:])  # the line is finished


def test_nothing_on_a_pipe_by_default():
    rc, out, stdout = run(graph_code(), tty=False)
    assert rc == 0 and "result None" in stdout, out
    assert out == ""


def test_progress_false_on_a_terminal_shows_nothing():
    rc, out, stdout = run(graph_code(progress=False))
    assert rc == 0 and "result None" in stdout, out
    assert out == ""


def test_a_short_run_on_a_terminal_shows_nothing():
    rc, out, stdout = run(graph_code(tasks=10))  # ~0.5 s: several wait slices, under 1 s
    assert rc == 0 and "result None" in stdout, out
    assert out == ""


def test_env_turns_it_on_in_a_pipe_as_log_lines():
    rc, out, stdout = run(graph_code(), tty=False, GPUFLOW_PROGRESS="1")
    assert rc == 0 and "result None" in stdout, out
    assert "\r" not in out  # a log gets lines, not a bar redrawn in place
    assert re.search(r"^progress: 40/40 tasks \(100%\), 0 failed, \d+\.\d tasks/s, "
                     r"ETA 0\.0 s, elapsed \d+\.\d s$", out, re.M), out


def test_env_turns_it_off_on_a_terminal():
    rc, out, stdout = run(graph_code(), GPUFLOW_PROGRESS="0")
    assert rc == 0 and "result None" in stdout, out
    assert out == ""


def test_progress_true_shows_even_a_short_run_in_a_pipe():
    rc, out, stdout = run(graph_code(tasks=3, seconds=0.01, progress=True), tty=False,
                          GPUFLOW_PROGRESS="0")  # the program's own choice wins
    assert rc == 0 and "result None" in stdout, out
    assert re.search(r"^progress: 3/3 tasks \(100%\), 0 failed", out, re.M), out


def test_a_failed_task_shows_in_the_failure_count():
    rc, out, stdout = run(graph_code(tasks=30, fail=True))
    assert rc == 0 and "ValueError('boom')" in stdout, out
    final = out.rsplit("\r[", 1)[1]
    assert "] 100% 31/31 tasks, 1 failed  " in final, out


def test_ctrl_c_with_the_bar_shown_cancels_at_once_and_ends_the_line():
    child = Child("""
        import sys, threading, gpuflow
        release = threading.Event()
        started, ended = [], []
        def body():
            started.append(1)
            sys.stderr.write("body started\\n")
            release.wait(600)  # until the main thread lets it (600 s: past any test's patience)
            ended.append(1)
        with gpuflow.Pool(cpu_workers=1, emulated_devices=0) as pool:
            g = gpuflow.Graph()
            for i in range(400):
                g.task(body)
            run = pool.run(g)
            try:
                run.result()
            except KeyboardInterrupt:
                print("interrupted", len(started), len(ended), flush=True)
                sys.stderr.write("AFTER\\n")
                run.progress = False
                release.set()
                run.wait(60)
                print("ran", len(started), "cancelled", run.stats().cancelled, run.state,
                      flush=True)
    """)
    stdout = interrupt_while_drawing(child, BAR)
    # The run was cancelled: of its 400 bodies, only the one running at the interrupt ran.
    assert "\nran 1 cancelled 399 cancelled\n" in stdout, stdout


def test_bar_text_is_the_clis():
    s = RunStats(tasks=40, succeeded=30, failed=2, cancelled=0, attempts=32, transfers=0,
                 bytes_transferred=0, elapsed_s=2.0)
    assert _progress.bar_text(s) == ("[########################......]  80% 32/40 tasks, "
                                     "2 failed  16.0 tasks/s  ETA 0.5 s  elapsed 2.0 s")
    assert _progress.line_text(s) == ("progress: 32/40 tasks (80%), 2 failed, 16.0 tasks/s, "
                                      "ETA 0.5 s, elapsed 2.0 s")
    idle = s._replace(succeeded=0, failed=0, elapsed_s=0.0)
    assert "ETA ?" in _progress.bar_text(idle)
    assert _progress.duration_text(3725) == "1h02m"


def test_a_notebook_kernel_counts_as_interactive(monkeypatch):
    """In Jupyter, stderr is no terminal, but the bar is drawn in place (as Dask's is)."""
    monkeypatch.delenv("GPUFLOW_PROGRESS", raising=False)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    ipython = types.ModuleType("IPython")
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    stats = RunStats(40, 10, 0, 0, 10, 0, 0, 2.0)

    ipython.get_ipython = lambda: types.SimpleNamespace()  # terminal IPython, stderr redirected
    assert _progress.watcher(lambda: stats, None) is None

    ipython.get_ipython = lambda: types.SimpleNamespace(kernel=object())
    shown = _progress.watcher(lambda: stats, None)
    assert shown is not None
    shown.tick()
    shown.close()
    text = err.getvalue()
    assert text.startswith("\r[#######") and " 10/40 tasks" in text and text.endswith("\n")


@pytest.mark.parametrize("value,expected", [("1", True), ("on", True), ("0", False),
                                            ("off", False), ("", None), ("maybe", None)])
def test_env_values(monkeypatch, value, expected):
    monkeypatch.setenv("GPUFLOW_PROGRESS", value)
    assert _progress.env_setting() is expected


def test_a_body_waiting_on_another_run_draws_no_bar_of_its_own():
    rc, out, stdout = run("""
        import time, gpuflow
        inner = gpuflow.Pool(cpu_workers=1, emulated_devices=0)
        def body():
            g = gpuflow.Graph()
            for i in range(30):
                g.task(time.sleep, 0.05)
            inner.run(g).result()  # ~1.5 s, waited for on a worker thread
            return "ok"
        with gpuflow.Pool(cpu_workers=1, emulated_devices=0) as outer:
            g = gpuflow.Graph()
            t = g.task(body)
            run = outer.run(g, progress=False)
            run.result()
            print("result", run.value(t), flush=True)
    """)
    assert rc == 0 and "result ok" in stdout, out
    assert out == ""
